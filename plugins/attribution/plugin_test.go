package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// fixturePods are the allocations of the golden test, one per way a
// device ID maps: an SR-IOV VF by PCI address (its RDMA device and netdev
// behind it), an RDMA device name, a netdev name, an NVMe controller by
// PCI address, a GPU UUID sysfs does not know, and a DRA claim.
func fixturePods() []*podresourcesv1.PodResources {
	dra := pod("ml", "trainer-2", "trainer", "nvidia.com/gpu", "GPU-8f3a6c1e")
	dra.Containers[0].DynamicResources = []*podresourcesv1.DynamicResource{{
		ClaimName: "rdma-claim", ClaimNamespace: "ml",
		ClaimResources: []*podresourcesv1.ClaimResource{{DriverName: "rdma.example.com", PoolName: "node-1", DeviceName: "mlx5_0"}},
	}}
	return []*podresourcesv1.PodResources{
		pod("ml", "trainer-0", "trainer", "nvidia.com/sriov_rdma", "0000:3b:00.2"),
		pod("ml", "trainer-1", "trainer", "rdma/hca_shared", "mlx5_3"),
		pod("net", "router-0", "app", "intel.com/sriov_netdevice", "ens1f0v1"),
		pod("storage", "db-0", "db", "example.com/nvme", "0000:5E:00.0"),
		dra,
		{Namespace: "kube-system", Name: "no-devices", Containers: []*podresourcesv1.ContainerResources{{Name: "c"}}},
	}
}

// fixtureKubelet is a fake kubelet with the fixture's pods and two
// allocatable VFs.
func fixtureKubelet(t *testing.T) *fakeKubelet {
	k := startKubelet(t)
	k.setPods(fixturePods()...)
	k.allocatable = []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/sriov_rdma", DeviceIds: []string{"0000:3b:00.2", "0000:3b:00.3"}}}
	return k
}

// options point the plugin at the fixture's sysfs and at k, with the
// socket as a path on the node under rootfs "/".
func options(t *testing.T, k *fakeKubelet, extra map[string]any) sdktest.Options {
	cfg := map[string]any{"pod_resources_socket": k.Socket}
	for key, v := range extra {
		cfg[key] = v
	}
	return sdktest.Options{Sysfs: sdktest.UnpackSysfs(t, "testdata/sriov.ttar"), Rootfs: "/", Config: cfg}
}

func TestFixtures(t *testing.T) {
	k := fixtureKubelet(t)
	text := sdktest.CleanGolden(t, sdktest.Run(t, newPlugin(), options(t, k, nil)), "testdata/fixtures.golden")
	sdktest.Contains(t, text,
		// The VF by PCI address, and what the rdma and ethtool plugins call it.
		`device_pod_info{device_kind="pci",device="0000:3b:00.2",pci_address="0000:3b:00.2",resource="nvidia.com/sriov_rdma",namespace="ml",pod="trainer-0",container="trainer"} 1`,
		`device_pod_info{device_kind="rdma",device="mlx5_2",pci_address="0000:3b:00.2",resource="nvidia.com/sriov_rdma",namespace="ml",pod="trainer-0",container="trainer"} 1`,
		`device_pod_info{device_kind="netdev",device="ens1f0v0",pci_address="0000:3b:00.2",resource="nvidia.com/sriov_rdma",namespace="ml",pod="trainer-0",container="trainer"} 1`,
		// Names map directly, with their function.
		`device_pod_info{device_kind="rdma",device="mlx5_3",pci_address="0000:3b:00.3",resource="rdma/hca_shared",namespace="ml",pod="trainer-1",container="trainer"} 1`,
		`device_pod_info{device_kind="netdev",device="ens1f0v1",pci_address="0000:3b:00.3",resource="intel.com/sriov_netdevice",namespace="net",pod="router-0",container="app"} 1`,
		// An upper-case address is sysfs's lower-case one.
		`device_pod_info{device_kind="nvme",device="nvme0",pci_address="0000:5e:00.0",resource="example.com/nvme",namespace="storage",pod="db-0",container="db"} 1`,
		`device_pod_info{device_kind="other",device="GPU-8f3a6c1e",pci_address="",resource="nvidia.com/gpu",namespace="ml",pod="trainer-2",container="trainer"} 1`,
		`device_pod_info{device_kind="rdma",device="mlx5_0",pci_address="0000:3b:00.0",resource="rdma.example.com",namespace="ml",pod="trainer-2",container="trainer"} 1`,
		`device_allocatable_info{device_kind="rdma",device="mlx5_3",pci_address="0000:3b:00.3",resource="nvidia.com/sriov_rdma"} 1`,
		`attribution_collection_errors_total{collector="pod_resources"} 0`,
		`attribution_collection_errors_total{collector="allocatable"} 0`,
	)
	sdktest.Lacks(t, text, `pod="no-devices"`, `collector="job_mapping"`)
	if w := sdktest.Promtool(t, text); w != "" {
		t.Errorf("promtool check metrics:\n%s", w)
	}
}

// TestPodsComeAndGo: a pod added between scrapes gets its series at the
// next refresh, a pod removed loses them (Prometheus marks them stale).
func TestPodsComeAndGo(t *testing.T) {
	k := startKubelet(t)
	k.setPods(pod("ml", "a", "c", "r", "mlx5_2"))
	p := newPlugin()
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := sdktest.Client(t, p, options(t, k, map[string]any{"cache_ttl": "10s"}))
	text := sdktest.Collect(t, c, 0).Text(t)
	sdktest.Contains(t, text, `pod="a"`)

	k.setPods(pod("ml", "b", "c", "r", "mlx5_3"))
	// Within the TTL the cached answer serves: no new List.
	text = sdktest.Collect(t, c, 0).Text(t)
	sdktest.Contains(t, text, `pod="a"`)
	sdktest.Lacks(t, text, `pod="b"`)

	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	text = sdktest.Collect(t, c, 0).Text(t)
	sdktest.Contains(t, text, `device_kind="rdma",device="mlx5_3",pci_address="0000:3b:00.3",resource="r",namespace="ml",pod="b"`)
	sdktest.Lacks(t, text, `pod="a"`)
	if n := k.lists.Load(); n != 2 {
		t.Errorf("%d Lists for two refreshes", n)
	}
}

// TestRateLimited: however many scrapes arrive, and however many at once,
// the kubelet sees one List per TTL; concurrent scrapes share it.
func TestRateLimited(t *testing.T) {
	k := fixtureKubelet(t)
	k.listDelay = 300 * time.Millisecond
	c := sdktest.Client(t, newPlugin(), options(t, k, map[string]any{"cache_ttl": "1m"}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res := sdktest.Collect(t, c, 0)
			if !strings.Contains(res.Text(t), `pod="trainer-0"`) || len(res.Errors) != 0 {
				t.Errorf("a concurrent scrape lacks the pods: errors %v", res.Errors)
			}
		})
	}
	wg.Wait()
	for range 5 {
		sdktest.Collect(t, c, 0)
	}
	if n, a := k.lists.Load(), k.allocs.Load(); n != 1 || a != 1 {
		t.Errorf("13 scrapes within the TTL made %d Lists and %d GetAllocatableResources, want 1 each", n, a)
	}
}

// TestHungKubelet: a List that does not answer ends at call_timeout, as a
// collect error naming the socket, not at the host's deadline.
func TestHungKubelet(t *testing.T) {
	k := fixtureKubelet(t)
	k.listDelay = time.Minute
	start := time.Now()
	res := sdktest.Run(t, newPlugin(), options(t, k, map[string]any{"call_timeout": "200ms", "job_mapping_dir": "/nonexistent"}))
	// The List answers after a minute; a collect that waited for it
	// instead of call_timeout would take that long (sdktest.Run fails on
	// the host's own deadline first).
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("collect took %s with call_timeout 200ms", d)
	}
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorPodResources ||
		!strings.Contains(res.Errors[0].GetMessage(), k.Socket) || !strings.Contains(res.Errors[0].GetMessage(), "DeadlineExceeded") {
		t.Fatalf("errors %v, want one pod_resources error naming %s and the deadline", res.Errors, k.Socket)
	}
}

// TestSocketAbsentOrRefused: a socket that refuses the connect is a
// collect error naming the socket and why; the Slurm series and the error
// counter are still written.
func TestSocketAbsentOrRefused(t *testing.T) {
	jobs := t.TempDir()
	writeFile(t, filepath.Join(jobs, "mlx5_2"), "4242\n")
	for _, tc := range []struct {
		name, why string
		socket    func(t *testing.T) string
	}{
		{"not a socket", "connection refused", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "kubelet.sock")
			writeFile(t, p, "")
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := tc.socket(t)
			p := newPlugin()
			c := sdktest.Client(t, p, sdktest.Options{Sysfs: t.TempDir(), Rootfs: "/", Config: map[string]any{"pod_resources_socket": sock, "job_mapping_dir": jobs}})
			for scrape := 1; scrape <= 2; scrape++ {
				res := sdktest.Collect(t, c, 0)
				if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorPodResources {
					t.Fatalf("errors %v, want one of collector pod_resources", res.Errors)
				}
				if msg := res.Errors[0].GetMessage(); !strings.Contains(msg, "kubelet pod-resources socket "+sock) || !strings.Contains(msg, tc.why) {
					t.Errorf("error %q does not name the socket and %q", msg, tc.why)
				}
				text := res.Text(t)
				sdktest.Contains(t, text, `device_job_info{device="mlx5_2",job_id="4242"} 1`,
					`attribution_collection_errors_total{collector="pod_resources"} `+string(rune('0'+scrape)))
				sdktest.Lacks(t, text, "device_pod_info")
			}
		})
	}
}

// TestPermissionDenied: the kubelet's socket is root's, mode 0755; a
// plugin without CAP_DAC_OVERRIDE gets "permission denied" naming it.
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may connect to any socket; TestInHostSandbox runs the plugin as its own user")
	}
	k := fixtureKubelet(t)
	if err := os.Chmod(k.Socket, 0o555); err != nil {
		t.Fatal(err)
	}
	res := sdktest.Run(t, newPlugin(), options(t, k, nil))
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), k.Socket+": connect: permission denied") {
		t.Fatalf("errors %v, want permission denied naming %s", res.Errors, k.Socket)
	}
}

// TestNoAllocatable: a kubelet without GetAllocatableResources is asked
// once; the pods are still exported and nothing is an error.
func TestNoAllocatable(t *testing.T) {
	k := fixtureKubelet(t)
	k.noAllocatable = true
	p := newPlugin()
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := sdktest.Client(t, p, options(t, k, map[string]any{"cache_ttl": "1s", "call_timeout": "500ms"}))
	for range 3 {
		res := sdktest.Collect(t, c, 0)
		if len(res.Errors) != 0 {
			t.Fatalf("errors %v", res.Errors)
		}
		text := res.Text(t)
		sdktest.Contains(t, text, `pod="trainer-0"`)
		sdktest.Lacks(t, text, "device_allocatable_info")
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
	}
	if n, a := k.lists.Load(), k.allocs.Load(); n != 3 || a != 1 {
		t.Errorf("%d Lists, %d GetAllocatableResources; want 3 and 1 (Unimplemented is remembered)", n, a)
	}
}

// TestAllowlistPushdown: with the pod families disabled the kubelet is
// never asked.
func TestAllowlistPushdown(t *testing.T) {
	k := fixtureKubelet(t)
	opts := options(t, k, nil)
	opts.DisabledMetrics = []string{"device_pod_info", "device_allocatable_info"}
	res := sdktest.Run(t, newPlugin(), opts)
	if len(res.Errors) != 0 || k.lists.Load() != 0 {
		t.Errorf("errors %v, %d Lists with the pod families disabled", res.Errors, k.lists.Load())
	}
}

// TestSocketAbsent: no socket is no kubelet on this node (yet), as a
// missing source is for the other plugins: a Configure warning, no pod
// series, no error; the pods appear once the kubelet serves.
func TestSocketAbsent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Sysfs: t.TempDir(), Rootfs: "/", Config: map[string]any{"pod_resources_socket": sock}})
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "pod_resources_socket: "+sock+" does not exist") {
		t.Errorf("warnings %q, want one naming the missing socket", c.Warnings)
	}
	res := sdktest.Collect(t, c, 0)
	if len(res.Errors) != 0 {
		t.Errorf("errors %v for a socket that is not there", res.Errors)
	}
	sdktest.Contains(t, res.Text(t), `attribution_collection_errors_total{collector="pod_resources"} 0`)
	sdktest.Lacks(t, res.Text(t), "device_pod_info")
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
