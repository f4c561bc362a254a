package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

func errorsOf(res *sdktest.Result, collector string) []string {
	var out []string
	for _, e := range res.Errors {
		if e.GetCollector() == collector {
			out = append(out, e.GetMessage())
		}
	}
	return out
}

// TestHungStatfs: a statfs that never returns (an NFS server gone away from
// a hard mount) costs the scrape statfs_timeout, is skipped and counted;
// later scrapes skip it at once without a second call (one goroutine per
// hung mount, however many scrapes), and the mount is back once the call
// returns.
func TestHungStatfs(t *testing.T) {
	hung := make(chan struct{})
	fake := &fakeStatfs{block: map[string]chan struct{}{"/host/mnt/shared": hung}}
	p := fixturePlugin(t, fake)
	c := sdktest.Client(t, p, fixtureOptions(t, "vm", map[string]any{"statfs_timeout": "1s"}))
	goroutines := runtime.NumGoroutine()

	start := time.Now()
	res := sdktest.Collect(t, c, 0)
	// At least statfs_timeout: the scrape waited for the call. The upper
	// bound is sdktest.Collect's deadline (DeadlineExceeded below), not a
	// budget on this machine's speed.
	if took := time.Since(start); took < time.Second {
		t.Errorf("scrape with a hung statfs took %s, want at least statfs_timeout (1s)", took)
	}
	if res.Status != nil {
		t.Fatalf("collect failed: %v", res.Status)
	}
	errs := errorsOf(res, collectorFilesystem)
	if len(errs) != 1 || !strings.Contains(errs[0], "statfs /host/mnt/shared: no answer before the deadline") {
		t.Errorf("filesystem errors %q, want one timeout of /host/mnt/shared", errs)
	}
	text := res.Text(t)
	sdktest.Lacks(t, text, `mount_point="/mnt/shared"`)
	mustContain(t, text,
		`disk_used_bytes{device="10.0.5.21:/vol/models",mount_point="/mnt/models",fstype="nfs"} 1.099511627776e+12`,
		`guest_collection_errors_total{collector="filesystem"} 1`)

	// The next scrapes do not wait and do not call again: the error is
	// the one written, without waiting, for a call still in flight (a
	// scrape that waited would report "no answer before the deadline"),
	// and the hung mount's statfs count stays 1.
	for i := 2; i <= 4; i++ {
		res = sdktest.Collect(t, c, 0)
		errs = errorsOf(res, collectorFilesystem)
		if len(errs) != 1 || !strings.Contains(errs[0], "statfs /host/mnt/shared: the call started") || !strings.Contains(errs[0], "has not returned; skipped") {
			t.Errorf("scrape %d: filesystem errors %q", i, errs)
		}
	}
	if n := fake.count("/host/mnt/shared"); n != 1 {
		t.Errorf("statfs of the hung mount called %d times over 4 scrapes, want 1", n)
	}
	if n := fake.count("/host/mnt/models"); n != 4 {
		t.Errorf("statfs of a healthy mount called %d times over 4 scrapes, want 4", n)
	}
	// Scrapes 2-4 started no goroutine that outlives them (two of grace
	// for the connection's own, which end on their own time).
	settled := false
	for deadline := time.Now().Add(waitDeadline); time.Now().Before(deadline) && !settled; time.Sleep(20 * time.Millisecond) {
		settled = runtime.NumGoroutine() <= goroutines+2
	}
	if !settled {
		t.Errorf("%d goroutines after 4 scrapes, %d after the first: hung calls pile up", runtime.NumGoroutine(), goroutines)
	}
	mustContain(t, res.Text(t), `guest_collection_errors_total{collector="filesystem"} 4`)

	// The server is back: the blocked call returns, the mount is read again.
	close(hung)
	waitFor(t, func() bool {
		p.statfs.mu.Lock()
		defer p.statfs.mu.Unlock()
		return len(p.statfs.inflight) == 0
	})
	res = sdktest.Collect(t, c, 0)
	if errs := errorsOf(res, collectorFilesystem); len(errs) != 0 {
		t.Errorf("errors after the server came back: %q", errs)
	}
	mustContain(t, res.Text(t), `disk_size_bytes{device="10.0.5.20:/exports/shared",mount_point="/mnt/shared",fstype="nfs4"} 1.099511627776e+13`)
	if n := fake.count("/host/mnt/shared"); n != 2 {
		t.Errorf("statfs of the recovered mount called %d times, want 2", n)
	}
}

// TestStatfsBoundedByScrapeDeadline: a statfs_timeout longer than the
// host's collect timeout does not make the scrape miss its deadline: the
// wait ends statfsReserve before it. A scrape past its deadline would end
// with DeadlineExceeded.
func TestStatfsBoundedByScrapeDeadline(t *testing.T) {
	hung := make(chan struct{})
	defer close(hung)
	fake := &fakeStatfs{block: map[string]chan struct{}{"/host/data": hung}}
	c := sdktest.Client(t, fixturePlugin(t, fake), fixtureOptions(t, "vm", map[string]any{"statfs_timeout": "30s"}))
	// 10 s: the plugin leaves a tenth of it (1 s) for writing and sending,
	// which no load reaches; a 1 s deadline left 100 ms.
	start := time.Now()
	res := sdktest.Collect(t, c, 10*time.Second)
	if res.Status != nil {
		t.Fatalf("collect with a 10s deadline and statfs_timeout 30s failed after %s: %v", time.Since(start), res.Status)
	}
	if errs := errorsOf(res, collectorFilesystem); len(errs) != 1 || !strings.Contains(errs[0], "/host/data") {
		t.Errorf("filesystem errors %q", errs)
	}
	sdktest.Contains(t, res.Text(t), `disk_used_bytes{device="vda1",mount_point="/"`)
}

// TestStatfsFailure: a mount whose statfs fails is one counted partial
// error naming the path; the other mounts are exported.
func TestStatfsFailure(t *testing.T) {
	fake := &fakeStatfs{missing: map[string]bool{"/host/mnt/models": true}}
	res := sdktest.Run(t, fixturePlugin(t, fake), fixtureOptions(t, "vm", nil))
	if errs := errorsOf(res, collectorFilesystem); len(errs) != 1 || !strings.Contains(errs[0], "statfs /host/mnt/models") {
		t.Errorf("filesystem errors %q", errs)
	}
	text := res.Text(t)
	sdktest.Lacks(t, text, `mount_point="/mnt/models"`)
	sdktest.Contains(t, text, `disk_used_bytes{device="vdb",mount_point="/data",fstype="xfs"}`)
}

// TestSelectMounts: types, exclusion, the first mount point of each
// filesystem, escapes undone, paths under the root filesystem.
func TestSelectMounts(t *testing.T) {
	root := sdktest.Unpack(t, "testdata/vm.ttar")
	pfs, err := procfs.NewFS(root + "/proc")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := readMountinfo(pfs, 0)
	if err != nil {
		t.Fatal(err)
	}
	ms := selectMounts(infos, "/host", []string{"ext4", "xfs"}, regexp.MustCompile(`^/data$`))
	var got []string
	for _, m := range ms {
		got = append(got, m.device+" "+m.mountPoint+" "+m.fstype+" "+m.path)
	}
	// /data is excluded, so its bind mount /var/lib/containers is the
	// filesystem's first mount point.
	want := []string{
		"vda1 / ext4 /host",
		"vdb /var/lib/containers xfs /host/var/lib/containers",
		"nvme0n1p1 /mnt/scratch space ext4 /host/mnt/scratch space",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mounts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ms := selectMounts(infos, "/", nil, regexp.MustCompile(`x`)); len(ms) != 0 {
		t.Errorf("no types: %v", ms)
	}
	empty, _ := procfs.NewFS(t.TempDir())
	if _, err := readMountinfo(empty, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing mountinfo: %v, want not exist", err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`:     "/mnt/a b",
		`/mnt/tab\011x`:   "/mnt/tab\tx",
		`/mnt/back\134sl`: `/mnt/back\sl`,
		`/mnt/plain`:      "/mnt/plain",
		`/mnt/short\04`:   `/mnt/short\04`,
		`/mnt/notoct\999`: `/mnt/notoct\999`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// waitDeadline bounds every wait of this package's tests for a condition:
// it only matters when the test fails, so it is long enough for a loaded
// CI machine, never a budget the code must meet.
const waitDeadline = 60 * time.Second

// waitFor polls cond until it holds, failing after waitDeadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitDeadline); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("condition not met within %s", waitDeadline)
}

// TestMountinfoPID: mountinfo_pid reads another process's mount table (the
// node's init from a pod: /host/proc/1/mountinfo), the mount points still
// under the host's root filesystem.
func TestMountinfoPID(t *testing.T) {
	opts := fixtureOptions(t, "vm", map[string]any{"mountinfo_pid": 1})
	node := "22 1 253:16 / / rw,relatime shared:1 - xfs /dev/vdb rw\n" +
		"23 22 0:21 / /proc rw,relatime shared:12 - proc proc rw\n"
	if err := os.MkdirAll(filepath.Join(opts.Procfs, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(opts.Procfs, "1", "mountinfo"), []byte(node), 0o644); err != nil {
		t.Fatal(err)
	}
	res := sdktest.Run(t, fixturePlugin(t, &fakeStatfs{}), opts)
	if len(res.Errors) != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	text := res.Text(t)
	mustContain(t, text, `disk_size_bytes{device="vdb",mount_point="/",fstype="xfs"} 3.221225472e+10`)
	sdktest.Lacks(t, text, `mount_point="/data"`, `device="vda1"`)
}
