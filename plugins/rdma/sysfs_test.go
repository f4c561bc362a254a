package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/plugins/internal/sysfs"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// The counter parser and its fuzz test are in plugins/internal/sysfs.

func TestNormalizeAndRate(t *testing.T) {
	for in, want := range map[string]string{"4: ACTIVE": "ACTIVE", "1: DOWN": "DOWN", "9: WEIRD": "WEIRD", "": ""} {
		if got := normalizeState(in, portStateNames); got != want {
			t.Errorf("state %q = %q", in, got)
		}
	}
	if got := normalizeState("5: LinkUp", physStateNames); got != "LINK_UP" {
		t.Errorf("phys = %q", got)
	}
	if s, w := parseRate("13.75 Gb/sec (1X FDR)"); s != "13.75 Gb/sec" || w != "1X" {
		t.Errorf("rate = %q %q", s, w)
	}
	if s, w := parseRate("garbage"); s != "garbage" || w != "" {
		t.Errorf("rate = %q %q", s, w)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A device whose counters are broken in every way a file can be: each bad
// file is skipped and counted, the good ones and the ports survive.
func TestRobustness(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "devices", "virtual", "infiniband", "bad0")
	if err := os.MkdirAll(filepath.Join(root, "class", "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/infiniband/bad0", filepath.Join(root, "class", "infiniband", "bad0")); err != nil {
		t.Fatal(err)
	}
	// A dangling device link (device removed between readdir and read).
	if err := os.Symlink("../../devices/virtual/infiniband/gone0", filepath.Join(root, "class", "infiniband", "gone0")); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 11; n++ {
		port := filepath.Join(dev, "ports", fmt.Sprint(n))
		writeFile(t, filepath.Join(port, "state"), "4: ACTIVE\n")
		writeFile(t, filepath.Join(port, "counters", "good"), fmt.Sprintf("%d\n", n))
	}
	p1 := filepath.Join(dev, "ports", "1")
	bad := map[string]string{"empty": "", "garbage": "hello\n", "binary": "\x00\xff\x13", "neg": "-1\n",
		"hex": "0x1f\n", "huge": "99999999999999999999999\n", "big": strings.Repeat("1", 5000)}
	for n, c := range bad {
		writeFile(t, filepath.Join(p1, "counters", n), c)
	}
	if err := os.Mkdir(filepath.Join(p1, "counters", "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(p1, "counters", "dangling")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(p1, "hw_counters", "lifespan"), "12\n")
	writeFile(t, filepath.Join(p1, "hw_counters", "good"), "999\n") // duplicate of counters/good
	writeFile(t, filepath.Join(p1, "hw_counters", "VL15-x"), "3\n")
	const wantErrs = 9

	res := sdktest.Run(t, newPlugin(), sdktest.Options{Sysfs: root, Config: map[string]any{"optional_counters": false}})
	if res.Status != nil {
		t.Fatalf("scrape failed: %v", res.Status)
	}
	text := res.Text(t)
	if len(res.Errors) != wantErrs {
		t.Errorf("%d partial errors, want %d: %v", len(res.Errors), wantErrs, res.Errors)
	}
	if !strings.Contains(text, fmt.Sprintf("rdma_scrape_errors_total %d", wantErrs)) {
		t.Errorf("scrape errors:\n%s", grep(text, "scrape_errors"))
	}
	var order []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "rdma_good_total{") {
			order = append(order, l)
		}
	}
	if len(order) != 11 || !strings.Contains(order[0], `port="1"} 1`) || !strings.Contains(order[10], `port="11"} 11`) {
		t.Errorf("good counters per port (counters/ wins over hw_counters/):\n%s", strings.Join(order, "\n"))
	}
	for _, want := range []string{`rdma_vl15_x_total{device="bad0",port="1"} 3`, `rdma_lifespan_milliseconds{device="bad0",port="1"} 12`} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(text, "gone0") || strings.Contains(text, "rdma_empty_total") || strings.Contains(text, "rdma_adir_total") {
		t.Error("bad entries exported")
	}
	// Port order of port_info is numeric.
	idx1 := strings.Index(text, `rdma_port_info{device="bad0",port="2"`)
	idx10 := strings.Index(text, `rdma_port_info{device="bad0",port="10"`)
	if idx1 < 0 || idx10 < 0 || idx1 > idx10 {
		t.Error("ports not in numeric order")
	}
}

// No class/infiniband at all: an empty, successful scrape.
func TestNoRDMA(t *testing.T) {
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Sysfs: t.TempDir(), Config: map[string]any{"optional_counters": false}})
	text := res.Text(t)
	if len(res.Errors) != 0 || !strings.Contains(text, `rdma_scrape_collector_success{collector="sysfs"} 1`) || strings.Contains(text, "rdma_port_info") {
		t.Errorf("errors %v\n%s", res.Errors, text)
	}
}

// Devices appear and disappear between scrapes; the static cache follows.
func TestDeviceChurn(t *testing.T) {
	base := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	r := newSysfsReader(base, nil)
	ctx := context.Background()
	devs, err := r.devices(ctx)
	if err != nil || len(devs) != 5 {
		t.Fatalf("%d devices, %v", len(devs), err)
	}
	if err := os.Remove(filepath.Join(base, "class", "infiniband", "mlx5_2")); err != nil {
		t.Fatal(err)
	}
	devs, _ = r.devices(ctx)
	if len(devs) != 4 || len(r.cache) != 4 {
		t.Fatalf("after removal: %d devices, %d cached", len(devs), len(r.cache))
	}
	if err := os.Symlink("../../devices/pci0000:16/0000:16:02.0/0000:17:00.2/infiniband/mlx5_2", filepath.Join(base, "class", "infiniband", "mlx5_2")); err != nil {
		t.Fatal(err)
	}
	devs, _ = r.devices(ctx)
	if len(devs) != 5 || !devs[3].isVF || devs[3].pfDevice != "mlx5_0" {
		t.Fatalf("after re-add: %+v", devs)
	}
	// Counters are never served from the cache.
	writeFile(t, filepath.Join(base, "class", "infiniband", "mlx5_0", "ports", "1", "counters", "port_xmit_data"), "5\n")
	devs, _ = r.devices(ctx)
	for _, c := range devs[1].ports[0].counters {
		if c.name == "port_xmit_data" && c.value != 5 {
			t.Errorf("stale counter %d", c.value)
		}
	}
}

func BenchmarkSysfsDevices(b *testing.B) {
	root := filepath.Join(sdktest.Unpack(b, "testdata/sysfs.ttar"), "sys")
	r := newSysfsReader(root, nil)
	for b.Loop() {
		if _, err := r.devices(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// The descriptors held between collects follow the tree: a counter file
// that appears later is read, one that goes away is not exported, and a
// device removed and created again (another directory under the same
// name) is read afresh, identity included; nothing stays held for a
// device that is gone.
func TestHeldFilesFollowTheTree(t *testing.T) {
	base := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	r := newSysfsReader(base, nil)
	defer r.close()
	ctx := context.Background()
	counter := func(devs []deviceData, dev, name string) (uint64, bool) {
		for _, d := range devs {
			if d.name != dev {
				continue
			}
			for _, c := range d.ports[0].counters {
				if c.name == name {
					return c.value, true
				}
			}
		}
		return 0, false
	}
	devs, err := r.devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := r.fds.Held()
	if held == 0 {
		t.Fatal("nothing held after a collect")
	}
	port := filepath.Join(base, "class", "infiniband", "mlx5_0", "ports", "1")
	if _, ok := counter(devs, "mlx5_0", "late_counter"); ok {
		t.Fatal("late_counter before it exists")
	}
	writeFile(t, filepath.Join(port, "hw_counters", "late_counter"), "17\n")
	if err := os.Remove(filepath.Join(port, "counters", "port_xmit_data")); err != nil {
		t.Fatal(err)
	}
	devs, _ = r.devices(ctx)
	if v, ok := counter(devs, "mlx5_0", "late_counter"); !ok || v != 17 {
		t.Errorf("late_counter = %d, %v; want 17", v, ok)
	}
	if _, ok := counter(devs, "mlx5_0", "port_xmit_data"); ok {
		t.Error("a removed counter file is still exported")
	}

	// mlx5_1 removed: its class link and its directory; then a new
	// directory under the same name with other values.
	link := filepath.Join(base, "class", "infiniband", "mlx5_1")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	devDir := filepath.Join(filepath.Dir(link), target)
	saved := t.TempDir()
	if err := os.Rename(devDir, filepath.Join(saved, "mlx5_1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	devs, _ = r.devices(ctx)
	for _, d := range devs {
		if d.name == "mlx5_1" {
			t.Fatal("a removed device is exported")
		}
	}
	if r.fds.Held() >= held {
		t.Errorf("%d descriptors held after a device went away, %d before", r.fds.Held(), held)
	}
	if err := os.Rename(filepath.Join(saved, "mlx5_1"), devDir+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(devDir+".new", devDir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(devDir, "board_id"), "NEW_BOARD\n")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	devs, _ = r.devices(ctx)
	var found bool
	for _, d := range devs {
		if d.name == "mlx5_1" {
			found = true
			if d.ident.boardID != "NEW_BOARD" || len(d.ports) == 0 {
				t.Errorf("re-added device: board_id %q, %d ports", d.ident.boardID, len(d.ports))
			}
		}
	}
	if !found {
		t.Error("a re-added device is missing")
	}

	// Replaced between two collects, none seeing it gone: the directory is
	// another inode, so nothing read through the old one is reused.
	copyDir := devDir + ".copy"
	if out, err := exec.Command("cp", "-a", devDir, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	writeFile(t, filepath.Join(copyDir, "ports", "1", "counters", "port_rcv_data"), "4242\n")
	if err := os.RemoveAll(devDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(copyDir, devDir); err != nil {
		t.Fatal(err)
	}
	devs, _ = r.devices(ctx)
	if v, ok := counter(devs, "mlx5_1", "port_rcv_data"); !ok || v != 4242 {
		t.Errorf("replaced device: port_rcv_data = %d, %v; want the new directory's 4242", v, ok)
	}
}

// listings is how many directory listings the reader's held directories
// have made so far (every directory below the held devices).
func listings(r *sysfsReader) uint64 {
	var walk func(d *sysfs.Dir) uint64
	walk = func(d *sysfs.Dir) uint64 {
		n := d.Listings()
		for _, name := range d.Names() {
			if sub, err := d.Sub(name); err == nil {
				n += walk(sub)
			}
		}
		return n
	}
	var n uint64
	for _, h := range r.cache {
		n += walk(h.dir)
	}
	return n
}

// Once the tree has settled, a collect lists no directory below the
// devices again (one fstat each tells it nothing changed), and yet a
// counter file added or removed, a port added or removed and a device
// added or removed between two collects are each seen by the next one.
func TestUnchangedDirectoriesAreNotListedAgain(t *testing.T) {
	base := sdktest.UnpackSysfs(t, "testdata/sysfs.ttar")
	r := newSysfsReader(base, nil)
	defer r.close()
	ctx := context.Background()
	collect := func() []deviceData {
		t.Helper()
		devs, err := r.devices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return devs
	}
	// A directory changed within the last moments is listed again (its
	// stamp could hide a change in the same timestamp tick): wait until
	// the freshly unpacked tree is old enough for its stamps to be trusted.
	settled := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		before := listings(r)
		collect()
		if listings(r) == before {
			settled = true
			break
		}
	}
	if !settled {
		t.Fatal("every collect still lists directories 60 s after the tree was made")
	}
	for range 3 {
		before := listings(r)
		collect()
		if n := listings(r) - before; n != 0 {
			t.Fatalf("an unchanged tree: %d directories listed again", n)
		}
	}

	dev := func(devs []deviceData, name string) *deviceData {
		for i := range devs {
			if devs[i].name == name {
				return &devs[i]
			}
		}
		return nil
	}
	has := func(p portData, counter string) bool {
		for _, c := range p.counters {
			if c.name == counter {
				return true
			}
		}
		return false
	}
	ports := filepath.Join(base, "class", "infiniband", "mlx5_0", "ports")
	writeFile(t, filepath.Join(ports, "1", "hw_counters", "late_counter"), "17\n")
	if d := dev(collect(), "mlx5_0"); d == nil || !has(d.ports[0], "late_counter") {
		t.Error("a counter file added between collects is not read")
	}
	if err := os.Remove(filepath.Join(ports, "1", "counters", "port_rcv_data")); err != nil {
		t.Fatal(err)
	}
	if d := dev(collect(), "mlx5_0"); d == nil || has(d.ports[0], "port_rcv_data") {
		t.Error("a counter file removed between collects is still exported")
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(ports, "1"), filepath.Join(ports, "2")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if d := dev(collect(), "mlx5_0"); d == nil || len(d.ports) != 2 || d.ports[1].num != 2 || !has(d.ports[1], "late_counter") {
		t.Error("a port added between collects is not read")
	}
	if err := os.RemoveAll(filepath.Join(ports, "2")); err != nil {
		t.Fatal(err)
	}
	if d := dev(collect(), "mlx5_0"); d == nil || len(d.ports) != 1 {
		t.Error("a port removed between collects is still read")
	}
	link := filepath.Join(base, "class", "infiniband", "mlx5_1")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if dev(collect(), "mlx5_1") != nil {
		t.Error("a device removed between collects is still read")
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if d := dev(collect(), "mlx5_1"); d == nil || len(d.ports) == 0 {
		t.Error("a device added between collects is not read")
	}
}
