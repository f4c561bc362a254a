package main

import (
	"fmt"
	"log/slog"
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

// sysfsFixture unpacks testdata/<name>.ttar and returns its sysfs root.
func sysfsFixture(t testing.TB, name string) string {
	t.Helper()
	return sdktest.UnpackSysfs(t, "testdata/"+name+".ttar")
}

var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) // 1795953600

// testPlugin returns a plugin wired to fake devices and a fixed clock, whose
// poller is stopped when the test ends.
func testPlugin(t testing.TB, f *fakeDevices) *plugin {
	p := newPlugin()
	p.open = f.open
	p.now = func() time.Time { return fixedNow }
	p.log = slog.New(slog.DiscardHandler)
	p.minInterval = 0
	t.Cleanup(func() { p.Close() })
	return p
}

// fixtureFake serves the fixture pages: nvme0 healthy, nvme1 failing, and
// the nvme-tcp controller nvme2 fails with EIO.
func fixtureFake(t testing.TB) *fakeDevices {
	f := newFake()
	f.pages["nvme0"] = readBin(t, "healthy.bin")
	f.pages["nvme1"] = readBin(t, "failing.bin")
	f.cmdErrs["nvme2"] = syscall.EIO
	return f
}

func (p *plugin) readsDone() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.poller == nil {
		return 0
	}
	return p.poller.reads.Load()
}

// clientAfterFirstRound configures p behind the real gRPC path and waits
// until n SMART reads finished.
func clientAfterFirstRound(tb testing.TB, p *plugin, n uint64, opts sdktest.Options) pluginv1.PluginServiceClient {
	tb.Helper()
	c := sdktest.Client(tb, p, opts)
	waitFor(tb, "first SMART round", func() bool { return p.readsDone() >= n })
	return c
}

// runAfterFirstRound collects once from clientAfterFirstRound.
func runAfterFirstRound(t *testing.T, p *plugin, n uint64, opts sdktest.Options) *sdktest.Result {
	t.Helper()
	return sdktest.Collect(t, clientAfterFirstRound(t, p, n, opts), 0)
}

func TestGoldenFixtures(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	f := fixtureFake(t)
	p := testPlugin(t, f)
	c := clientAfterFirstRound(t, p, 3, sdktest.Options{Sysfs: root, Config: map[string]any{"smart_interval": "1h"}})
	res := sdktest.Collect(t, c, 0)
	if res.Status != nil {
		t.Fatalf("collect: %v", res.Status)
	}
	// nvme2's failed read is one partial error, naming the device.
	if len(res.Errors) != 1 || res.Errors[0].Collector != "smart" || !strings.Contains(res.Errors[0].Message, "nvme2") ||
		!strings.Contains(res.Errors[0].Message, "input/output error") {
		t.Fatalf("errors = %v", res.Errors)
	}
	text := res.Text(t)
	sdktest.Golden(t, text, "testdata/fixtures.golden")
	checkExposition(t, text)
	for _, path := range f.paths {
		if !strings.HasPrefix(path, "/dev/nvme") {
			t.Errorf("opened %s, want /dev/nvmeN", path)
		}
	}
	// A second scrape serves the cache: no new ioctl, and the failed read
	// is not reported again.
	res = sdktest.Collect(t, c, 0)
	if len(res.Errors) != 0 || res.Text(t) != text {
		t.Errorf("second scrape: errors %v, exposition changed: %v", res.Errors, res.Text(t) != text)
	}
	for _, n := range []string{"nvme0", "nvme1", "nvme2"} {
		if calls, _, open := f.stats(n); calls != 1 || open != 0 {
			t.Errorf("%s: %d ioctls, %d handles open; want 1, 0", n, calls, open)
		}
	}
}

func TestGoldenQEMUCapture(t *testing.T) {
	root := sysfsFixture(t, "sysfs-qemu")
	f := newFake()
	f.pages["nvme0"] = readBin(t, "qemu.bin")
	p := testPlugin(t, f)
	text := sdktest.CleanGolden(t, runAfterFirstRound(t, p, 1, sdktest.Options{Sysfs: root}), "testdata/qemu.golden")
	checkExposition(t, text)
	// The real sysfs pads identity strings with spaces; labels are trimmed.
	if !strings.Contains(text, `serial="LAB123",model="QEMU NVMe Ctrl",firmware_rev="7.2.22",`) {
		t.Errorf("identity not trimmed:\n%s", text)
	}
	// QEMU reports spare 0 % with threshold 0 %: no spare_low warning.
	if !strings.Contains(text, `nvme_smart_critical_warning{device="nvme0",serial="LAB123",bit="spare_low"} 0`) {
		t.Errorf("spare_low raised for 0/0 spare")
	}
}

func TestNoCapability(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	f := newFake()
	for _, n := range []string{"nvme0", "nvme1"} {
		f.cmdErrs[n] = syscall.EACCES // no CAP_SYS_ADMIN: the kernel refuses Get Log Page
	}
	f.openErrs["nvme2"] = syscall.EACCES // device node not accessible
	p := testPlugin(t, f)
	var logs strings.Builder
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	// Missing privilege must not fail the scrape or spam errors.
	text := sdktest.CleanGolden(t, runAfterFirstRound(t, p, 3, sdktest.Options{Sysfs: root}), "testdata/nocap.golden")
	checkExposition(t, text)
	sdktest.Contains(t, text,
		`nvme_smart_available{device="nvme0"} 0`, `nvme_smart_available{device="nvme1"} 0`, `nvme_smart_available{device="nvme2"} 0`,
		`nvme_info{device="nvme0",serial="S64FNE0T712345",`,
	)
	// No SMART values without a successful read.
	sdktest.Lacks(t, text, "nvme_media_errors_total", "nvme_smart_last_success")
	if n := strings.Count(logs.String(), "CAP_SYS_ADMIN"); n != 1 {
		t.Errorf("want exactly one log line about the capability, got %d:\n%s", n, logs.String())
	}
}

func TestSMARTDisabled(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	f := fixtureFake(t)
	p := testPlugin(t, f)
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, Config: map[string]any{"smart": false}})
	text := res.Text(t)
	if !strings.Contains(text, `nvme_smart_available{device="nvme0"} 0`) || !strings.Contains(text, "nvme_info{") {
		t.Errorf("unexpected exposition:\n%s", text)
	}
	if len(f.paths) != 0 {
		t.Errorf("devices opened with smart: false: %v", f.paths)
	}
}

func TestAllowlistSkipsPoller(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	f := fixtureFake(t)
	p := testPlugin(t, f)
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: root, EnabledMetrics: []string{"nvme_info"}})
	if text := res.Text(t); !strings.Contains(text, "nvme_info{") || strings.Contains(text, "nvme_smart") || strings.Contains(text, "nvme_controller_state") {
		t.Errorf("allowlist not applied:\n%s", text)
	}
	p.mu.Lock()
	running := p.poller != nil
	p.mu.Unlock()
	if running || len(f.paths) != 0 {
		t.Errorf("poller running (%v) / devices opened (%v) although no SMART family is enabled", running, f.paths)
	}
}

func TestIdentityErrorsArePartial(t *testing.T) {
	sys := sysfsFixture(t, "sysfs")
	ctrl := filepath.Join(sys, "class/nvme/nvme1")
	// A directory where the model file belongs (a read error), a missing
	// firmware_rev, and binary garbage as serial.
	must(t, os.Remove(filepath.Join(ctrl, "model")))
	must(t, os.Mkdir(filepath.Join(ctrl, "model"), 0o755))
	must(t, os.Remove(filepath.Join(ctrl, "firmware_rev")))
	must(t, os.WriteFile(filepath.Join(ctrl, "serial"), []byte("\xff\xfeAB\x00\x00  \n"), 0o644))
	// A controller whose directory vanished (dangling class link).
	must(t, os.Symlink("../../devices/gone/nvme7", filepath.Join(sys, "class/nvme/nvme7")))
	f := fixtureFake(t)
	p := testPlugin(t, f)
	res := runAfterFirstRound(t, p, 4, sdktest.Options{Sysfs: sys})
	if res.Status != nil {
		t.Fatalf("scrape failed: %v", res.Status)
	}
	var identityErrs []string
	for _, e := range res.Errors {
		if e.Collector == "identity" {
			identityErrs = append(identityErrs, e.Message)
		}
	}
	if len(identityErrs) != 3 {
		t.Fatalf("identity errors = %q, want 3 (model, firmware_rev, nvme7)", identityErrs)
	}
	text := res.Text(t)
	for _, want := range []string{
		"nvme_info{device=\"nvme1\",serial=\"\uFFFDAB\",model=\"\",firmware_rev=\"\",transport=\"pcie\",address=\"0000:c2:00.0\",cntlid=\"0\"} 1",
		// nvme1's model and firmware_rev, and nvme7's directory.
		`nvme_collection_errors_total{collector="identity"} 3`,
		// nvme2's EIO, and nvme7's read (no fake page).
		`nvme_collection_errors_total{collector="smart"} 2`,
		`nvme_collection_errors_total{collector="controllers"} 0`,
		`nvme_media_errors_total{device="nvme1"} 1847`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, `nvme_info{device="nvme7"`) {
		t.Error("info exported for an unreadable controller")
	}
}

// TestNoNVMeDriver: without class/nvme there is nothing to report but the
// error counter, at zero.
func TestNoNVMeDriver(t *testing.T) {
	p := testPlugin(t, newFake())
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: t.TempDir()})
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("no class/nvme: status %v errors %v", res.Status, res.Errors)
	}
	want := "# HELP nvme_collection_errors_total " + descCollectionErrors.Help + "\n" +
		"# TYPE nvme_collection_errors_total counter\n" +
		`nvme_collection_errors_total{collector="controllers"} 0` + "\n" +
		`nvme_collection_errors_total{collector="identity"} 0` + "\n" +
		`nvme_collection_errors_total{collector="smart"} 0` + "\n"
	if text := res.Text(t); text != want {
		t.Fatalf("no class/nvme: exposition\n%s\nwant\n%s", text, want)
	}
}

// TestUnlistableControllers: a class/nvme that cannot be read is one
// partial error, counted under controllers.
func TestUnlistableControllers(t *testing.T) {
	sys := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(sys, "class"), 0o755))
	must(t, os.WriteFile(filepath.Join(sys, "class/nvme"), nil, 0o644))
	c := sdktest.Client(t, testPlugin(t, newFake()), sdktest.Options{Sysfs: sys})
	for i := 1; i <= 2; i++ {
		res := sdktest.Collect(t, c, 0)
		if res.Status != nil || len(res.Errors) != 1 || res.Errors[0].Collector != "controllers" {
			t.Fatalf("scrape %d: status %v errors %v", i, res.Status, res.Errors)
		}
		if want := fmt.Sprintf(`nvme_collection_errors_total{collector="controllers"} %d`, i); !strings.Contains(res.Text(t), want+"\n") {
			t.Errorf("scrape %d: missing %s in\n%s", i, want, res.Text(t))
		}
	}
}

func TestInfoCatalogue(t *testing.T) {
	info := newPlugin().Info()
	if info.Name != "nvme" || len(info.Metrics) != len(smartDescs)+3+len(namespaceDescs) {
		t.Fatalf("info = %+v", info)
	}
	seen := map[string]bool{}
	for _, d := range info.Metrics {
		if seen[d.Name] {
			t.Errorf("duplicate family %s", d.Name)
		}
		seen[d.Name] = true
		if (d.Type == sdk.Counter) != strings.HasSuffix(d.Name, "_total") {
			t.Errorf("%s: counter/_total mismatch", d.Name)
		}
	}
}

// TestNamespaceInfoNSIDFromName: a namespace without the nsid attribute
// is exported with the nsid of its name, never an empty label.
func TestNamespaceInfoNSIDFromName(t *testing.T) {
	root := sysfsFixture(t, "sysfs")
	must(t, os.Remove(filepath.Join(root, "class/nvme/nvme0/nvme0n1/nsid")))
	res := runAfterFirstRound(t, testPlugin(t, fixtureFake(t)), 3, sdktest.Options{Sysfs: root})
	text := res.Text(t)
	sdktest.Contains(t, text, `nvme_namespace_info{device="nvme0",namespace="nvme0n1",nsid="1",ana_state=""} 1`)
	sdktest.Lacks(t, text, `nsid=""`)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkExposition runs promtool and promlint and fails on any complaint.
func checkExposition(t *testing.T, text string) {
	t.Helper()
	for _, p := range sdktest.Lint(t, text) {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	t.Run("promtool", func(t *testing.T) {
		sdktest.PromtoolClean(t, text, nil) // no seed name draws a finding
	})
}

// BenchmarkCollect measures one scrape (3 controllers, SMART from cache)
// through the gRPC path.
func BenchmarkCollect(b *testing.B) {
	root := sysfsFixture(b, "sysfs")
	f := fixtureFake(b)
	p := testPlugin(b, f)
	c := clientAfterFirstRound(b, p, 3, sdktest.Options{Sysfs: root, Config: map[string]any{"smart_interval": "1h"}})
	b.ResetTimer()
	for b.Loop() {
		if res := sdktest.Collect(b, c, 0); res.Status != nil {
			b.Fatal(res.Status)
		}
	}
}
