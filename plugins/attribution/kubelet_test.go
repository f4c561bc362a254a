package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// fakeKubelet serves the real pod-resources v1 API (the generated server
// interface of k8s.io/kubelet) on a unix socket, with pods a test changes
// between scrapes, and counts the calls it answers.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	Socket string

	mu          sync.Mutex
	pods        []*podresourcesv1.PodResources
	allocatable []*podresourcesv1.ContainerDevices
	// noAllocatable answers GetAllocatableResources with Unimplemented,
	// as a kubelet before 1.23 does.
	noAllocatable bool
	// listDelay holds each List, for the tests of sharing and deadlines.
	listDelay time.Duration

	lists, allocs atomic.Int64
}

// startKubelet serves a fakeKubelet until the test ends. The socket is
// not in t.TempDir: a unix socket path must fit in 108 bytes.
func startKubelet(t *testing.T) *fakeKubelet {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &fakeKubelet{Socket: filepath.Join(dir, "kubelet.sock")}
	l, err := net.Listen("unix", k.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, k)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return k
}

func (k *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.lists.Add(1)
	k.mu.Lock()
	delay, pods := k.listDelay, k.pods
	k.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: pods}, nil
}

func (k *fakeKubelet) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	k.allocs.Add(1)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.noAllocatable {
		return nil, status.Error(codes.Unimplemented, "method GetAllocatableResources not implemented")
	}
	return &podresourcesv1.AllocatableResourcesResponse{Devices: k.allocatable}, nil
}

// setPods replaces the pods the kubelet reports.
func (k *fakeKubelet) setPods(pods ...*podresourcesv1.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

// pod is a pod with one container holding devices of one resource.
func pod(namespace, name, container, resource string, ids ...string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{
		Namespace: namespace, Name: name,
		Containers: []*podresourcesv1.ContainerResources{{
			Name:    container,
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}},
		}},
	}
}
