package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// requireRoot skips tests that load BPF programs when not root (CI runs as
// root, so they run there).
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading BPF programs needs root (CAP_BPF+CAP_PERFMON)")
	}
}

// start configures a fresh plugin through the real gRPC path and unloads
// its programs when the test ends.
func start(t *testing.T, cfg map[string]any) (*plugin, pluginv1.PluginServiceClient) {
	t.Helper()
	return startIn(t, cfg, "/proc")
}

// startIn is start with another procfs root (for a mounts file the test
// writes).
func startIn(t *testing.T, cfg map[string]any, procfs string) (*plugin, pluginv1.PluginServiceClient) {
	t.Helper()
	p := newPlugin()
	p.logf = func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }
	c := sdktest.Client(t, p, sdktest.Options{Config: cfg, Sysfs: "/sys", Procfs: procfs, Rootfs: "/"})
	t.Cleanup(p.Close)
	return p, c
}

// loopDevice attaches a 16 MiB temporary file to a free loop device with
// direct I/O and returns the device's name (loop3) and path.
func loopDevice(t testing.TB) (name, path string) {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup (util-linux) is needed for the block I/O test")
	}
	backing := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(backing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(backing, 16<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", "--direct-io=on", backing).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: losetup: %v: %s", err, out)
	}
	path = strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", path).Run() })
	return filepath.Base(path), path
}

const (
	blockSize    = 4096
	deviceBlocks = 16 << 20 / blockSize // loopDevice's size; longer runs wrap around
)

// directIO writes then reads n blocks of dev with O_DIRECT, each
// synchronous, so that each is exactly one request of blockSize bytes (a
// waiting request cannot be merged with the next).
func directIO(t testing.TB, dev string, writes, reads int) {
	t.Helper()
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("open %s O_DIRECT: %v", dev, err)
	}
	defer unix.Close(fd)
	buf := alignedBuffer(blockSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	for i := range writes {
		if n, err := unix.Pwrite(fd, buf, int64(i%deviceBlocks)*blockSize); err != nil || n != blockSize {
			t.Fatalf("pwrite %s block %d: %d, %v", dev, i, n, err)
		}
	}
	for i := range reads {
		if n, err := unix.Pread(fd, buf, int64(i%deviceBlocks)*blockSize); err != nil || n != blockSize {
			t.Fatalf("pread %s block %d: %d, %v", dev, i, n, err)
		}
	}
}

// alignedBuffer returns n bytes aligned for O_DIRECT.
func alignedBuffer(n int) []byte {
	raw := make([]byte, n+blockSize)
	off := blockSize - int(uintptr(unsafe.Pointer(&raw[0]))%blockSize)
	if off == blockSize {
		off = 0
	}
	return raw[off : off+n]
}

// testDiskIO asserts that the disk counters of a loop device move by
// exactly the direct I/O the test does, in the given attach mode.
func testDiskIO(t *testing.T, attach string) {
	requireRoot(t)
	name, path := loopDevice(t)
	_, c := start(t, map[string]any{"attach": attach, "tcp_retransmits": false})
	before := collect(t, c)
	if got := before.get(t, `ebpf_program_loaded{attach="`+attach+`",program="block_rq_issue"}`); got != 1 {
		t.Fatalf("block_rq_issue not running as %s:\n%s\n%s", attach, before.text, before.errorText())
	}
	if got := before.get(t, `ebpf_program_loaded{attach="`+attach+`",program="block_rq_complete"}`); got != 1 {
		t.Fatalf("block_rq_complete not running as %s", attach)
	}
	const writes, reads = 37, 23
	dev := `{device="` + name + `"}`
	// The kernel does not always run an attached program: on this
	// project's CI machine (6.18, 2 vCPUs, loaded) about one block
	// completion in a thousand reached the tracepoint (a tracefs instance
	// on the same event recorded it, and the kernel's own
	// /sys/block/<dev>/stat counted it) without the completion program
	// running (its run count did not move, nor its recursion-miss count),
	// in both attach modes, and no later scrape found it: the count is
	// short for good, by one or a few requests, in a few percent of rounds
	// of 60 requests. A short round is therefore repeated (each round is
	// judged on its own, never summed), and one exact round is required;
	// a count above the workload, a byte count that is not the requests
	// times blockSize, or a histogram count that is not the request count
	// fails at once, and so do maxRounds short rounds in a row (a plugin
	// that loses requests loses them in every round).
	const maxRounds = 5
	var after scrape
	delta := func(name string) float64 { return after.or0(name) - before.or0(name) }
	for round := 1; ; round++ {
		directIO(t, path, writes, reads)
		after = collect(t, c)
		short := false
		for _, op := range []struct {
			name string
			n    float64
		}{{"write", writes}, {"read", reads}} {
			ios := delta("disk_" + op.name + "s_completed_total" + dev)
			if ios > op.n {
				t.Fatalf("%s: %v requests counted for %v done\n%s", op.name, ios, op.n, after.text)
			}
			if got := delta("disk_" + op.name + "_bytes_total" + dev); got != ios*blockSize {
				t.Errorf("%s: %v bytes counted for %v requests of %d", op.name, got, ios, blockSize)
			}
			if got := delta("disk_" + op.name + "_latency_seconds_count" + dev); got != ios {
				t.Errorf("%s: latency histogram counted %v requests, the counter %v", op.name, got, ios)
			}
			if ios < op.n {
				short = true
				t.Logf("round %d: %s counted %v of %v requests", round, op.name, ios, op.n)
			}
		}
		if !short {
			break
		}
		if round == maxRounds {
			t.Fatalf("%d rounds in a row counted fewer requests than were done\n%s", maxRounds, after.text)
		}
		before = after
	}
	for _, op := range []string{"read", "write"} {
		total := delta("disk_" + op + "_latency_seconds_sum" + dev)
		// Each request took at least 1µs, and the test's few dozen
		// requests less than a minute together.
		n := delta("disk_" + op + "_latency_seconds_count" + dev)
		if total < n*1e-6 || total > 60 {
			t.Errorf("%s latency total %v s for %v requests is implausible", op, total, n)
		}
		// The +Inf bucket is the count; the buckets are cumulative.
		inf := after.get(t, `disk_`+op+`_latency_seconds_bucket{device="`+name+`",le="+Inf"}`)
		if inf != after.get(t, "disk_"+op+"_latency_seconds_count"+dev) {
			t.Errorf("%s: +Inf bucket %v differs from the count", op, inf)
		}
	}
	if len(after.errors) > 0 {
		t.Errorf("collect errors:\n%s", after.errorText())
	}
	if got := after.get(t, `ebpf_collection_errors_total{collector="disk"}`); got != 0 {
		t.Errorf("ebpf_collection_errors_total{collector=\"disk\"} = %v", got)
	}
}

func TestDiskTPBTF(t *testing.T) { testDiskIO(t, attachTPBTF) }

// TestDiskTracepoint forces the classic-tracepoint fallback (dev+sector
// keys, rwbs, tracefs ids).
func TestDiskTracepoint(t *testing.T) {
	requireRoot(t)
	requireTracefs(t)
	testDiskIO(t, attachTracepoint)
}

// requireTracefs mounts tracefs at /sys/kernel/tracing when it is not
// mounted (a fresh machine), for the classic-tracepoint tests.
func requireTracefs(t testing.TB) {
	t.Helper()
	const dir = "/sys/kernel/tracing"
	if _, err := os.Stat(filepath.Join(dir, "events")); err == nil {
		return
	}
	if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
		t.Skipf("tracefs is not mounted and cannot be: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
}
