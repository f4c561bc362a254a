package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// maxPodResourcesMessage is the largest answer accepted from the kubelet:
// the kubelet's own client allows 16 MiB, gRPC's default of 4 MiB is
// reached by a large node's List.
const maxPodResourcesMessage = 16 << 20

// allocation is one device allocated to one container.
type allocation struct {
	Namespace, Pod, Container, Resource, DeviceID string
}

// allocatable is one device the kubelet may allocate.
type allocatable struct {
	Resource, DeviceID string
}

// podSnapshot is one refresh's answer from the kubelet.
type podSnapshot struct {
	Allocations []allocation
	Allocatable []allocatable
	// ListErr and AllocatableErr are the refresh's failures; a failed
	// GetAllocatableResources does not cost the allocations.
	ListErr, AllocatableErr error
}

// podResources reads the kubelet's pod-resources API through a cache: one
// refresh (List, then GetAllocatableResources) per ttl at most, shared by
// the scrapes that arrive meanwhile, failed refreshes included, so a
// missing socket is not retried at the scrape rate either.
type podResources struct {
	socket  string // as the plugin sees it (under --path.rootfs)
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time

	flight singleflight.Group

	mu      sync.Mutex
	cached  *podSnapshot
	fetched time.Time
	// noAllocatable remembers a kubelet without GetAllocatableResources
	// (before 1.23, or its feature gate off): it is not asked again.
	noAllocatable bool
}

// snapshot returns the cached answer, refreshing it when it is older than
// ttl. The refresh runs under its own deadline, not ctx's: it is shared,
// and a scrape that gives up must not fail the others waiting for it.
func (p *podResources) snapshot(ctx context.Context) (*podSnapshot, error) {
	p.mu.Lock()
	if p.cached != nil && p.now().Sub(p.fetched) < p.ttl {
		s := p.cached
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	ch := p.flight.DoChan("refresh", func() (any, error) {
		s := p.refresh()
		p.mu.Lock()
		p.cached, p.fetched = s, p.now()
		p.mu.Unlock()
		return s, nil
	})
	select {
	case r := <-ch:
		return r.Val.(*podSnapshot), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// refresh asks the kubelet once, over a connection of its own: a kubelet
// restart replaces the socket, and a connection per ttl costs the kubelet
// less than gRPC's reconnect backoff would cost the freshness of the data.
func (p *podResources) refresh() *podSnapshot {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	s := &podSnapshot{}
	// No socket is no kubelet on this node (yet): no pods and no error, as
	// the other plugins treat a source that is not there; Configure has
	// warned. A socket that exists and refuses is an error.
	if _, err := os.Stat(p.socket); errors.Is(err, fs.ErrNotExist) {
		return s
	}
	client, closeConn, err := p.dial(ctx)
	if err != nil {
		s.ListErr = err
		return s
	}
	defer closeConn()
	list, err := client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		s.ListErr = fmt.Errorf("kubelet pod-resources socket %s: List: %w", p.socket, err)
		return s
	}
	s.Allocations = allocations(list)

	p.mu.Lock()
	skip := p.noAllocatable
	p.mu.Unlock()
	if skip {
		return s
	}
	alloc, err := client.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		p.mu.Lock()
		p.noAllocatable = true
		p.mu.Unlock()
	case err != nil:
		s.AllocatableErr = fmt.Errorf("kubelet pod-resources socket %s: GetAllocatableResources: %w", p.socket, err)
	default:
		for _, d := range alloc.GetDevices() {
			for _, id := range d.GetDeviceIds() {
				s.Allocatable = append(s.Allocatable, allocatable{Resource: d.GetResourceName(), DeviceID: id})
			}
		}
	}
	return s
}

// dial connects to the socket itself before handing the connection to
// gRPC, so that a missing socket or a refused connect is an error naming
// the socket and the reason ("no such file or directory", "permission
// denied"), not gRPC's generic Unavailable after its own retries.
func (p *podResources) dial(ctx context.Context) (podresourcesv1.PodResourcesListerClient, func(), error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", p.socket)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err // "connect: permission denied" without the repeated path
		}
		if errors.Is(err, syscall.EPERM) {
			// The sandbox's seccomp filter, not the socket's mode (EACCES).
			return nil, nil, fmt.Errorf("kubelet pod-resources socket %s: %w: the sandbox allows no connect; grant the socket's directory in plugins.attribution.manifest network.unix (see the plugin's README, The sandbox)", p.socket, err)
		}
		return nil, nil, fmt.Errorf("kubelet pod-resources socket %s: %w", p.socket, err)
	}
	// The connection made above is the first gRPC uses; a reconnect
	// within the refresh dials again.
	pre := make(chan net.Conn, 1)
	pre <- conn
	cc, err := grpc.NewClient("passthrough:///kubelet-pod-resources",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodResourcesMessage)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			select {
			case c := <-pre:
				return c, nil
			default:
				return d.DialContext(ctx, "unix", p.socket)
			}
		}))
	closeAll := func() {
		if cc != nil {
			cc.Close()
		}
		select {
		case c := <-pre: // never handed to gRPC
			c.Close()
		default:
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("kubelet pod-resources socket %s: %w", p.socket, err)
	}
	return podresourcesv1.NewPodResourcesListerClient(cc), closeAll, nil
}

// allocations flattens a List answer: device-plugin devices and dynamic
// resources (DRA claims: the driver is the resource, the claim's device
// name the device ID), sorted so that the output is stable.
func allocations(list *podresourcesv1.ListPodResourcesResponse) []allocation {
	var out []allocation
	for _, pod := range list.GetPodResources() {
		for _, c := range pod.GetContainers() {
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					out = append(out, allocation{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName(), Resource: d.GetResourceName(), DeviceID: id})
				}
			}
			for _, dr := range c.GetDynamicResources() {
				for _, cr := range dr.GetClaimResources() {
					if cr.GetDeviceName() != "" {
						out = append(out, allocation{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName(), Resource: cr.GetDriverName(), DeviceID: cr.GetDeviceName()})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b allocation) int {
		return strings.Compare(a.Namespace+"\x00"+a.Pod+"\x00"+a.Container+"\x00"+a.Resource+"\x00"+a.DeviceID,
			b.Namespace+"\x00"+b.Pod+"\x00"+b.Container+"\x00"+b.Resource+"\x00"+b.DeviceID)
	})
	return slices.Compact(out)
}
