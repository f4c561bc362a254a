package sdk_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/internal/failtest"
	"github.com/plexporter/plexporter/sdk/sdktest"
	"github.com/plexporter/plexporter/sdk/transport"
)

var (
	bytesDesc = sdk.NewDesc("demo_bytes_total", sdk.Counter, "Bytes moved.", "dev")
	tempDesc  = sdk.NewDesc("demo_temperature_celsius", sdk.Gauge, "Temperature.", "sensor")
	latDesc   = sdk.NewDesc("demo_latency_seconds", sdk.Histogram, "Latency.", "op")
	sumDesc   = sdk.NewDesc("demo_rtt_seconds", sdk.Summary, "RTT.")
)

// demo is a plugin whose behaviour each test sets through fields.
type demo struct {
	n        int // number of counter series
	readTemp int // how often the temperature source was read
	panicMsg string
	sleep    time.Duration
	cfg      struct {
		Device string `json:"device"`
	}
	collectFn func(w *sdk.Writer) error
}

func (d *demo) Info() sdk.Info {
	return sdk.Info{Name: "demo", Version: "1.2.3", Metrics: []*sdk.Desc{bytesDesc, tempDesc, latDesc, sumDesc}}
}

func (d *demo) Configure(_ context.Context, c sdk.Config) error { return c.Decode(&d.cfg) }

func (d *demo) Collect(ctx context.Context, w *sdk.Writer) error {
	if d.panicMsg != "" {
		w.Counter(bytesDesc, 1, "before-panic")
		panic(d.panicMsg)
	}
	if d.sleep > 0 {
		select {
		case <-time.After(d.sleep):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range d.n {
		w.Counter(bytesDesc, float64(i), "dev"+itoa(i))
	}
	if w.Enabled(tempDesc) {
		d.readTemp++
		w.Gauge(tempDesc, 41.5, "composite")
	}
	w.Histogram(latDesc, []float64{0.1, 1}, []uint64{3, 5}, 7, 4.25, "read")
	w.Summary(sumDesc, []float64{0.5, 0.9}, []float64{0.01, 0.02}, 10, 0.15)
	if d.collectFn != nil {
		return d.collectFn(w)
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRoundTripGolden(t *testing.T) {
	res := sdktest.Run(t, &demo{n: 2}, sdktest.Options{})
	if res.Info.GetName() != "demo" || res.Info.GetVersion() != "1.2.3" || res.Info.GetApiVersion() == "" {
		t.Fatalf("info = %v", res.Info)
	}
	if len(res.Info.GetMetrics()) != 4 {
		t.Fatalf("catalogue has %d families, want 4", len(res.Info.GetMetrics()))
	}
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v errors %v", res.Status, res.Errors)
	}
	sdktest.Golden(t, res.Text(t), "testdata/demo.golden")
}

func TestBatchesSplitAndJoin(t *testing.T) {
	// More samples than one batch holds: the stream carries several batches
	// and the same family in more than one of them.
	n := sdk.DefaultBatchSamples*2 + 10
	res := sdktest.Run(t, &demo{n: n}, sdktest.Options{})
	if len(res.Batches) < 3 {
		t.Fatalf("got %d batches, want >= 3", len(res.Batches))
	}
	for _, mf := range res.Families(t) {
		if mf.GetName() != "demo_bytes_total" {
			continue
		}
		if len(mf.GetMetric()) != n {
			t.Fatalf("demo_bytes_total has %d series, want %d", len(mf.GetMetric()), n)
		}
		// Batches reuse the memory of the ones already sent: every sample
		// must still carry its own label and value.
		for i, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() != "dev"+itoa(i) || m.GetCounter().GetValue() != float64(i) {
				t.Fatalf("sample %d is %v", i, m)
			}
		}
	}
}

func TestAllowlistPushdown(t *testing.T) {
	d := &demo{n: 3}
	res := sdktest.Run(t, d, sdktest.Options{EnabledMetrics: []string{"demo_bytes"}})
	text := res.Text(t)
	if !strings.Contains(text, "demo_bytes_total{") || strings.Contains(text, "demo_temperature") || strings.Contains(text, "demo_latency") {
		t.Fatalf("allowlist not applied:\n%s", text)
	}
	if d.readTemp != 0 {
		t.Fatalf("disabled source was read %d times", d.readTemp)
	}
	res = sdktest.Run(t, &demo{n: 1}, sdktest.Options{DisabledMetrics: []string{"demo_*_seconds"}})
	if text := res.Text(t); strings.Contains(text, "demo_latency") || strings.Contains(text, "demo_rtt") || !strings.Contains(text, "demo_temperature") {
		t.Fatalf("denylist not applied:\n%s", text)
	}
}

// With a metric_prefix the allowlist matches the name as exposed, as the
// host's filter does: the prefixed pattern selects the family, the bare
// one selects nothing (the host would hide what it selected).
func TestMetricPrefix(t *testing.T) {
	res := sdktest.Run(t, &demo{n: 1}, sdktest.Options{MetricPrefix: "crusoe_vm_", EnabledMetrics: []string{"crusoe_vm_demo_temperature_celsius"}})
	if text := res.Text(t); !strings.Contains(text, "crusoe_vm_demo_temperature_celsius{sensor=\"composite\"} 41.5") || strings.Contains(text, "bytes") {
		t.Fatalf("prefix/allowlist wrong:\n%s", text)
	}
	res = sdktest.Run(t, &demo{n: 1}, sdktest.Options{MetricPrefix: "crusoe_vm_", EnabledMetrics: []string{"demo_temperature_celsius"}})
	for _, b := range res.Batches {
		if len(b.GetFamilies()) > 0 {
			t.Fatalf("an allowlist without the prefix collected what the host hides:\n%s", res.Text(t))
		}
	}
}

func TestPanicBecomesCollectError(t *testing.T) {
	d := &demo{panicMsg: "boom"}
	c := sdktest.Client(t, d, sdktest.Options{})
	res := sdktest.Collect(t, c, 0)
	if res.Status != nil {
		t.Fatalf("stream failed: %v", res.Status)
	}
	if len(res.Errors) != 1 || res.Errors[0].Collector != "panic" || !strings.Contains(res.Errors[0].Message, "boom") {
		t.Fatalf("errors = %v", res.Errors)
	}
	if !strings.Contains(res.Text(t), `demo_bytes_total{dev="before-panic"} 1`) {
		t.Fatal("samples written before the panic were lost")
	}
	// The plugin stays up: the next collect works.
	d.panicMsg, d.n = "", 1
	if res := sdktest.Collect(t, c, 0); res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("collect after panic: %v %v", res.Status, res.Errors)
	}
}

func TestDeadlineHonoured(t *testing.T) {
	c := sdktest.Client(t, &demo{sleep: time.Minute}, sdktest.Options{})
	start := time.Now()
	res := sdktest.Collect(t, c, 200*time.Millisecond)
	if status.Code(res.Status) != codes.DeadlineExceeded {
		t.Fatalf("status = %v, want DeadlineExceeded", res.Status)
	}
	// The plugin would answer in a minute; half of it is a margin no load
	// reaches for a 200 ms deadline.
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("collect ignored its deadline (took %v)", took)
	}
}

func TestPartialErrorKeepsSamples(t *testing.T) {
	d := &demo{n: 1, collectFn: func(w *sdk.Writer) error {
		w.Error("sensors", errors.New("hwmon3: permission denied"))
		w.Error("sensors", errors.New("hwmon3: permission denied")) // reported once
		return errors.New("late failure")
	}}
	res := sdktest.Run(t, d, sdktest.Options{})
	if len(res.Errors) != 2 || res.Errors[0].Collector != "sensors" || res.Errors[1].Message != "late failure" {
		t.Fatalf("errors = %v", res.Errors)
	}
	if !strings.Contains(res.Text(t), "demo_temperature_celsius") {
		t.Fatal("samples lost on partial error")
	}
}

// One invalid string must cost its series at the host's guard, not the
// plugin's stream: the string table is bytes, and error texts are repaired.
func TestInvalidUTF8DoesNotBreakTheStream(t *testing.T) {
	n := sdk.DefaultBatchSamples + 10 // the bad sample's batch, and one after it
	d := &demo{n: n, collectFn: func(w *sdk.Writer) error {
		w.Error("sensors\xff", errors.New("read /sys/\xfe\xff: no such device"))
		return nil
	}}
	var res *sdktest.Result
	run := failtest.Run(t, func(tb *failtest.TB) {
		res = sdktest.Run(tb, &demoWith{demo: d, before: func(w *sdk.Writer) { w.Gauge(tempDesc, 1, "bad\xffsensor") }}, sdktest.Options{})
	})
	// The plugin's own test fails: the host drops that sample.
	run.Expect(t, "invalid_label_value", "demo_temperature_celsius", "label sensor")
	if res.Status != nil {
		t.Fatalf("stream failed: %v", res.Status)
	}
	if len(res.Errors) != 1 || res.Errors[0].Collector != "sensors\uFFFD" || res.Errors[0].Message != "read /sys/\uFFFD: no such device" {
		t.Fatalf("errors = %q", res.Errors)
	}
	counters, bad := 0, 0
	sent, err := wire.Families(res.Batches)
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range sent {
		for _, m := range mf.GetMetric() {
			switch {
			case mf.GetName() == "demo_bytes_total":
				counters++
			case mf.GetName() == "demo_temperature_celsius" && m.GetLabel()[0].GetValue() == "bad\xffsensor":
				bad++
			}
		}
	}
	if counters != n || bad != 1 {
		t.Fatalf("%d counters of %d and %d invalid samples arrived; the SDK must send both, the host drops the invalid one", counters, n, bad)
	}
}

// demoWith runs before ahead of demo's samples.
type demoWith struct {
	*demo
	before func(w *sdk.Writer)
}

func (d *demoWith) Collect(ctx context.Context, w *sdk.Writer) error {
	d.before(w)
	return d.demo.Collect(ctx, w)
}

// Long label values fill a batch by size before it is full of samples, so
// messages stay far below the host's per-message limit.
func TestBatchesSplitBySize(t *testing.T) {
	long := strings.Repeat("v", 64<<10)
	d := &demo{collectFn: func(w *sdk.Writer) error {
		for i := range 200 { // 12.5 MiB of label values
			w.Counter(bytesDesc, 1, long+itoa(i))
		}
		return nil
	}}
	// An operator who allows such values (the host drops them by default).
	res := sdktest.Run(t, d, sdktest.Options{MaxLabelValueLen: 1 << 20})
	if res.Status != nil {
		t.Fatalf("stream failed: %v", res.Status)
	}
	if len(res.Batches) < 13 {
		t.Fatalf("%d batches for 12.5 MiB, want them split at about %d bytes", len(res.Batches), sdk.DefaultBatchBytes)
	}
	for i, b := range res.Batches {
		if size := proto.Size(b); size > sdk.DefaultBatchBytes+(128<<10) {
			t.Errorf("batch %d is %d bytes encoded", i, size)
		}
	}
}

func TestWriterMisuseIsReportedNotFatal(t *testing.T) {
	d := &demo{collectFn: func(w *sdk.Writer) error {
		w.Gauge(bytesDesc, 1, "x")        // wrong type
		w.Counter(bytesDesc, 1, "x", "y") // wrong label count
		w.Histogram(latDesc, []float64{1}, nil, 1, 1, "op")
		return nil
	}}
	var res *sdktest.Result
	run := failtest.Run(t, func(tb *failtest.TB) { res = sdktest.Run(tb, d, sdktest.Options{}) })
	// Each misuse fails the plugin's own test.
	run.Expect(t, "declared counter but written as gauge")
	run.Expect(t, "1 label names but a sample has 2 values")
	run.Expect(t, "1 bounds but 0 bucket counts")
	if len(res.Errors) != 3 {
		t.Fatalf("want 3 misuse errors, got %v", res.Errors)
	}
	for _, e := range res.Errors {
		if e.Collector != "sdk" {
			t.Errorf("misuse reported under %q", e.Collector)
		}
	}
}

func TestConfigureRejectsUnknownKeys(t *testing.T) {
	d := &demo{}
	cfg := map[string]any{"device": "nvme0"}
	sdktest.Run(t, d, sdktest.Options{Config: cfg})
	if d.cfg.Device != "nvme0" {
		t.Fatalf("config not decoded: %+v", d.cfg)
	}
	err := d.Configure(context.Background(), configWith(t, map[string]any{"devcie": "x"}))
	if err == nil || !strings.Contains(err.Error(), "devcie") {
		t.Fatalf("want error naming the unknown key, got %v", err)
	}
}

func TestCollectorPlugin(t *testing.T) {
	reg := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "legacy_events_total", Help: "Events."}, []string{"kind"})
	reg.WithLabelValues("a").Add(3)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "legacy_wait_seconds", Help: "Wait.", Buckets: []float64{1, 2}})
	h.Observe(1.5)
	p, err := sdk.NewCollectorPlugin(sdk.Info{Name: "legacy"}, reg, h)
	if err != nil {
		t.Fatal(err)
	}
	text := sdktest.Run(t, p, sdktest.Options{}).Text(t)
	for _, want := range []string{`legacy_events_total{kind="a"} 3`, `legacy_wait_seconds_bucket{le="1"} 0`, `legacy_wait_seconds_bucket{le="2"} 1`, `legacy_wait_seconds_bucket{le="+Inf"} 1`, "legacy_wait_seconds_sum 1.5"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
}

// A CollectorPlugin has no settings: an empty or absent section is fine,
// any key is refused under its name (plexporter plugin check's
// configure.unknown-key), as Config.Decode refuses an unknown one.
func TestCollectorPluginRefusesConfig(t *testing.T) {
	p, err := sdk.NewCollectorPlugin(sdk.Info{Name: "legacy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []map[string]any{nil, {}} {
		if err := p.Configure(context.Background(), sdktest.Config(t, raw, sdk.Paths{})); err != nil {
			t.Errorf("section %v: %v", raw, err)
		}
	}
	err = p.Configure(context.Background(), sdktest.Config(t, map[string]any{"intreval": "5s", "devices": 1.0}, sdk.Paths{}))
	if err == nil || !strings.HasPrefix(err.Error(), "devices, intreval: unknown keys") || !strings.Contains(err.Error(), "plugins.legacy.config") {
		t.Fatalf("want an error naming both keys and the section, got %v", err)
	}
}

// A collect that ignores its deadline keeps running in the plugin; the next
// one must not run beside it (plugin code need not be concurrency-safe).
func TestCollectsDoNotOverlap(t *testing.T) {
	release := make(chan struct{})
	var running, maxRunning atomic.Int32
	d := &demo{collectFn: func(w *sdk.Writer) error {
		if n := running.Add(1); n > maxRunning.Load() {
			maxRunning.Store(n)
		}
		defer running.Add(-1)
		<-release // ignores its deadline
		return nil
	}}
	c := sdktest.Client(t, d, sdktest.Options{})
	first := sdktest.Collect(t, c, 100*time.Millisecond)
	second := sdktest.Collect(t, c, 100*time.Millisecond)
	close(release)
	if status.Code(first.Status) != codes.DeadlineExceeded || status.Code(second.Status) != codes.DeadlineExceeded {
		t.Fatalf("statuses %v / %v, want both DeadlineExceeded", first.Status, second.Status)
	}
	if maxRunning.Load() != 1 {
		t.Fatalf("%d collects ran at once", maxRunning.Load())
	}
	// It waits for the released one to finish, however slow the machine.
	if res := sdktest.Collect(t, c, 0); res.Status != nil {
		t.Fatalf("collect after the hung one finished: %v", res.Status)
	}
}

// Type prints as the text format's # TYPE line does; an unset type is
// recognisable in messages rather than posing as one of them.
func TestTypeString(t *testing.T) {
	for typ, want := range map[sdk.Type]string{
		sdk.Counter: "counter", sdk.Gauge: "gauge", sdk.Histogram: "histogram",
		sdk.Summary: "summary", sdk.Untyped: "untyped", 0: "Type(0)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(typ), got, want)
		}
	}
}

// AnyEnabled, at collect and at Configure, says whether a source feeding
// some families must be read at all, by the same rule as Enabled (a
// family's name as exposed, the host's prefix included).
func TestAnyEnabled(t *testing.T) {
	for _, tc := range []struct {
		enabled []string
		prefix  string
		want    bool
	}{
		{nil, "", true},
		{[]string{"demo_bytes"}, "", false},
		{[]string{"demo_latency_seconds"}, "", true},
		{[]string{"vm_demo_temperature_celsius"}, "vm_", true},
		{[]string{"vm_demo_bytes"}, "vm_", false},
		{[]string{"demo_temperature_celsius"}, "vm_", false},
		{[]string{"demo_*"}, "vm_", false},
		{[]string{"vm_demo_*"}, "vm_", true},
	} {
		var atCollect, atConfigure bool
		p := &demoWith{demo: &demo{}, before: func(w *sdk.Writer) { atCollect = w.AnyEnabled(tempDesc, latDesc) }}
		cfg := &anyEnabledAtConfigure{demoWith: p, got: &atConfigure}
		sdktest.Run(t, cfg, sdktest.Options{EnabledMetrics: tc.enabled, MetricPrefix: tc.prefix})
		if atCollect != tc.want || atConfigure != tc.want {
			t.Errorf("enabled %q prefix %q: AnyEnabled = %v at collect, %v at Configure; want %v", tc.enabled, tc.prefix, atCollect, atConfigure, tc.want)
		}
	}
	if (&sdk.Writer{}).AnyEnabled() {
		t.Error("AnyEnabled of no families is true")
	}
}

type anyEnabledAtConfigure struct {
	*demoWith
	got *bool
}

func (p *anyEnabledAtConfigure) Configure(ctx context.Context, c sdk.Config) error {
	*p.got = c.AnyEnabled(tempDesc, latDesc) && c.Enabled(tempDesc) == c.AnyEnabled(tempDesc)
	return p.demoWith.Configure(ctx, c)
}

// The server reuses one Writer from Collect to Collect: each collect must
// still send exactly its own samples and errors (none of the last one's,
// an error reported again is sent again), and an allowlist a new Configure
// sets must apply at once, not the Writer's cached decision.
func TestConsecutiveCollectsShareNothing(t *testing.T) {
	d := &demo{n: 3}
	calls := 0
	d.collectFn = func(w *sdk.Writer) error {
		calls++
		w.Error("sensors", errors.New("hwmon3: permission denied"))
		if calls == 1 {
			w.Error("fans", errors.New("only the first collect"))
		}
		return nil
	}
	c := sdktest.Client(t, d, sdktest.Options{})
	count := func(res *sdktest.Result) map[string]int {
		t.Helper()
		if res.Status != nil {
			t.Fatalf("collect: %v", res.Status)
		}
		fams, err := wire.Families(res.Batches)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, mf := range fams {
			n[mf.GetName()] += len(mf.GetMetric())
		}
		return n
	}
	first := sdktest.Collect(t, c, 0)
	if got := count(first); got["demo_bytes_total"] != 3 || len(first.Errors) != 2 {
		t.Fatalf("first collect: %v, errors %v", got, first.Errors)
	}
	d.n = 1
	second := sdktest.Collect(t, c, 0)
	got := count(second)
	if got["demo_bytes_total"] != 1 || got["demo_temperature_celsius"] != 1 || got["demo_latency_seconds"] != 1 || got["demo_rtt_seconds"] != 1 {
		t.Fatalf("second collect carries other samples than its own: %v", got)
	}
	if len(second.Errors) != 1 || second.Errors[0].Collector != "sensors" {
		t.Fatalf("second collect's errors = %v, want the sensors error (reported again) alone", second.Errors)
	}
	if _, err := c.Configure(context.Background(), &pluginv1.ConfigureRequest{EnabledMetrics: []string{"demo_bytes_total"}, HostApiVersion: transport.APIVersion}); err != nil {
		t.Fatal(err)
	}
	third := count(sdktest.Collect(t, c, 0))
	if third["demo_bytes_total"] != 1 || len(third) != 1 {
		t.Fatalf("after a Configure with an allowlist of demo_bytes_total: %v", third)
	}
}
