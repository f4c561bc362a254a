package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// Size of the large guest the CPU budget is about: the 64 vCPUs and
// 32 disks, each disk with two partitions and a filesystem on the second.
const (
	bigVCPUs = 64
	bigDisks = 32
	bigIRQs  = 1500 // numbered interrupts on the intr line
)

// diskName is the virtio name of disk i: vda..vdz, vdaa, vdab, ...
func diskName(i int) string {
	if i < 26 {
		return "vd" + string(rune('a'+i))
	}
	return "vd" + string(rune('a'+i/26-1)) + string(rune('a'+i%26))
}

// writeBigTree lays out the procfs and sysfs of the large guest under root.
func writeBigTree(t testing.TB, root string) {
	t.Helper()
	files := map[string]string{}
	var b strings.Builder
	fmt.Fprintf(&b, "cpu  %d 0 %d %d 1000 0 200 %d 0 0\n", 1000*bigVCPUs, 500*bigVCPUs, 90000*bigVCPUs, 7*bigVCPUs)
	for i := range bigVCPUs {
		fmt.Fprintf(&b, "cpu%d 1000 0 500 90000 1000 0 200 7 0 0\n", i)
	}
	b.WriteString("intr 123456789")
	for i := range bigIRQs {
		fmt.Fprintf(&b, " %d", i*37%1000)
	}
	b.WriteString("\nctxt 987654321\nbtime 1764547200\nprocesses 4123\nprocs_running 17\nprocs_blocked 3\n")
	b.WriteString("softirq 98341297 4 40192839 2173 3320881 1083412 0 2351 37002934 0 16736703\n")
	files["proc/stat"] = b.String()
	for _, r := range []string{"cpu", "io", "memory"} {
		files["proc/pressure/"+r] = "some avg10=1.00 avg60=2.00 avg300=3.00 total=123456789\nfull avg10=0.50 avg60=0.25 avg300=0.10 total=23456789\n"
	}
	b.Reset()
	for _, k := range []string{"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapCached", "Active", "Inactive",
		"Active(anon)", "Inactive(anon)", "Active(file)", "Inactive(file)", "Unevictable", "Mlocked", "SwapTotal", "SwapFree",
		"Zswap", "Zswapped", "Dirty", "Writeback", "AnonPages", "Mapped", "Shmem", "KReclaimable", "Slab", "SReclaimable",
		"SUnreclaim", "KernelStack", "PageTables", "SecPageTables", "NFS_Unstable", "Bounce", "WritebackTmp", "CommitLimit",
		"Committed_AS", "VmallocTotal", "VmallocUsed", "VmallocChunk", "Percpu", "HardwareCorrupted", "AnonHugePages",
		"ShmemHugePages", "ShmemPmdMapped", "FileHugePages", "FilePmdMapped", "Unaccepted", "HugePages_Total", "HugePages_Free",
		"HugePages_Rsvd", "HugePages_Surp", "Hugepagesize", "Hugetlb", "DirectMap4k", "DirectMap2M", "DirectMap1G"} {
		fmt.Fprintf(&b, "%s: %d kB\n", k, 123456789)
	}
	files["proc/meminfo"] = b.String()
	b.Reset()
	var mi strings.Builder
	mi.WriteString("22 1 0:2 / / rw,relatime shared:1 - overlay overlay rw\n")
	for i, pseudo := range []string{"/proc", "/sys", "/dev", "/dev/shm", "/dev/pts", "/run", "/run/lock", "/sys/fs/cgroup", "/sys/fs/bpf",
		"/sys/kernel/debug", "/sys/kernel/tracing", "/proc/sys/fs/binfmt_misc", "/dev/hugepages", "/dev/mqueue", "/sys/fs/fuse/connections"} {
		fmt.Fprintf(&mi, "%d 22 0:%d / %s rw,relatime shared:%d - tmpfs tmpfs rw\n", 30+i, 30+i, pseudo, 30+i)
	}
	for i := range 8 {
		fmt.Fprintf(&b, "   7       %d loop%d 52 0 2168 10 0 0 0 0 0 24 10 0 0 0 0 0 0\n", i, i)
		files[fmt.Sprintf("sys/block/loop%d/dev", i)] = fmt.Sprintf("7:%d\n", i)
	}
	for i := range bigDisks {
		d := diskName(i)
		major, minor := 253, i*16
		fmt.Fprintf(&b, " %d %7d %s 1450571 48211 84920466 799844 292919 380331 81353128 674586 0 612304 1474430 10 0 2048 3 8812 0\n", major, minor, d)
		for part := 1; part <= 2; part++ {
			fmt.Fprintf(&b, " %d %7d %s%d 1449870 48211 84893914 799801 292919 380331 81353128 674586 0 612260 1474387 10 0 2048 3 0 0\n", major, minor+part, d, part)
		}
		files["sys/block/"+d+"/dev"] = fmt.Sprintf("%d:%d\n", major, minor)
		fmt.Fprintf(&mi, "%d 22 %d:%d / /data/%s rw,relatime shared:%d - ext4 /dev/%s2 rw\n", 100+i, major, minor+2, d, 100+i, d)
	}
	files["proc/diskstats"] = b.String()
	files["proc/4242/mountinfo"] = mi.String()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("4242", filepath.Join(root, "proc", "self")); err != nil {
		t.Fatal(err)
	}
}

// bigPlugin is a plugin configured on the large guest's tree, statfs
// answering at once (the kernel's part of a local statfs is not the
// plugin's CPU), no kernel log.
func bigPlugin(t testing.TB) *plugin {
	root := t.TempDir()
	writeBigTree(t, root)
	p := newPlugin()
	p.statfs = newStatfsRunner(func(string) (fsUsage, error) {
		return fsUsage{blocks: 1 << 28, free: 1 << 27, avail: 1 << 26, blockSize: 4096, files: 1 << 24, filesFree: 1 << 23}, nil
	}, time.Now)
	paths := sdk.Paths{Procfs: root + "/proc", Sysfs: root + "/sys", Rootfs: "/"}
	if err := sdktest.Configure(t, p, map[string]any{"kmsg": false}, paths); err != nil {
		t.Fatal(err)
	}
	return p
}

// scrapeOnce is one whole Collect into batches (no gRPC), with the number
// of samples and partial errors it wrote.
func scrapeOnce(t testing.TB, p *plugin) (samples, errs int) {
	w := sdktest.NewWriter(nil, "", func(r *pluginv1.CollectResponse) error {
		for _, f := range r.GetBatch().GetFamilies() {
			samples += len(f.Values)
		}
		errs += len(r.GetErrors())
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := p.Collect(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return samples, errs
}

// BenchmarkCollectBigGuest is one scrape of the 64-vCPU, 32-disk guest.
//
//	go test ./plugins/guest -run '^$' -bench BigGuest -cpuprofile guest.pprof
func BenchmarkCollectBigGuest(b *testing.B) {
	p := bigPlugin(b)
	samples := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		samples, _ = scrapeOnce(b, p)
	}
	// statfs runs in goroutines: wall time (ns/op) is not CPU time.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(samples), "samples/op")
}

// TestBigGuestScrapeCPU: a scrape of the 64-vCPU, 32-disk guest costs the
// plugin at most 5 ms of CPU (the budget), averaged over 50
// scrapes (the process's user + system time, GC included).
func TestBigGuestScrapeCPU(t *testing.T) {
	p := bigPlugin(t)
	samples, errs := scrapeOnce(t, p)
	if errs != 0 {
		t.Fatalf("%d partial errors on the large tree", errs)
	}
	// 4 stat + 3x8 PSI + 2 meminfo + 32 disks x 10 + 32 filesystems x 5 + 8 error counters.
	if want := 4 + 24 + 2 + bigDisks*10 + bigDisks*5 + 7; samples != want {
		t.Errorf("%d samples, want %d", samples, want)
	}
	const n = 50
	cpu0 := cpuTime()
	for range n {
		scrapeOnce(t, p)
	}
	perScrape := (cpuTime() - cpu0) / n
	t.Logf("%d vCPUs, %d disks, %d filesystems: %s of CPU per scrape, %d samples", bigVCPUs, bigDisks, bigDisks, perScrape, samples)
	if raceEnabled {
		t.Log("race detector on: the 5ms budget is not checked")
		return
	}
	if perScrape > 5*time.Millisecond {
		t.Errorf("%s of CPU per scrape, want at most 5ms", perScrape)
	}
}

// cpuTime is the process's user + system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
