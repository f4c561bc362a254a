// Package sdktest runs a plugin through the real gRPC path inside a test,
// passes what it sends through the host's own guard, and compares what the
// host would serve with a reviewed golden file.
//
//	res := sdktest.Run(t, myplugin.New(), sdktest.Options{Sysfs: "testdata/sys"})
//	sdktest.Golden(t, res.Text(t), "testdata/metrics.golden")
//
// The guard is the host's (internal/guard), not a copy of its rules: a
// sample the host would drop — a duplicate series, an invalid metric or
// label name, a label value that is not UTF-8, a family that clashes with
// another one's series names or uses a prefix reserved for the host — fails
// the test with the rule, the family and the series. So does a write the
// SDK refused (a sample with the wrong label count or type) and, in Run, a
// family missing from the plugin's Info catalogue or written otherwise than
// it says. Series caps are the
// operator's and are not applied.
//
// Goldens are rendered by prometheus/common/expfmt from client_model
// families, independently of the host's encoder, after the guard: they hold
// what the host would serve. Run the test with -update to rewrite them,
// then review the diff like code.
//
// For a plugin's Configure alone, Config builds the sdk.Config the host
// would send from a map (the plugin's config section), Configure calls it,
// and Refuses checks a table of sections it must refuse by the key each
// error names.
//
// go-plugin's and the plugin's log lines are not shown; set
// PLEXPORTER_TEST_PLUGIN_LOGS=1 to get the plugin's (sdk.Logger's and the
// SDK's own, such as a panic's stack) on stderr.
package sdktest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/internal/testhook"
	"github.com/plexporter/plexporter/sdk/metricfilter"
	"github.com/plexporter/plexporter/sdk/transport"
)

var update = flag.Bool("update", false, "rewrite golden files (review the diff!)")

// Options configure the plugin like the host would.
type Options struct {
	Config          map[string]any // the plugin's config section
	Sysfs, Procfs   string
	Rootfs          string
	EnabledMetrics  []string
	DisabledMetrics []string
	MetricPrefix    string
	// DeviceInclude and DeviceExclude are the host's --device.include and
	// --device.exclude (sdk.Config.Devices).
	DeviceInclude, DeviceExclude string
	// Timeout is each Collect's deadline; DefaultTimeout if zero.
	Timeout time.Duration
	// MaxLabelValueLen is the host's --plugin.max-label-length, the
	// longest label value the guard lets through; 0 means the host's
	// default (4096 bytes).
	MaxLabelValueLen int
	// AllowUndeclared skips Run's check that every family the plugin
	// writes is in its Info catalogue (by name or by a '*' pattern). The
	// catalogue feeds `plexporter metrics` and the allowlist's typo warning.
	AllowUndeclared bool
}

// Result is one Info + Configure + Collect round trip.
type Result struct {
	Info *pluginv1.InfoResponse
	// Warnings are the remarks Configure returned (Run only).
	Warnings []string
	// Batches are the batches as the plugin sent them, before the guard;
	// Families and Text are what the host would serve of them.
	Batches []*pluginv1.Batch
	Errors  []*pluginv1.CollectError
	// Status is the Collect stream's final error (nil when it ended OK).
	Status error
	// Drops are the guard's drops, one per rule broken and family (or
	// series); Collect and Run fail the test for each.
	Drops []Drop

	maxLabelValueLen int
	// filter and prefix are the host's allowlist and the plugin's
	// metric_prefix, which the guard applies as the host does.
	filter *metricfilter.Filter
	prefix string
}

// Drop is what the host's guard refused of a plugin's output.
type Drop struct {
	// Reason is the rule broken, as the host's
	// plexporter_dropped_series_total{reason} counts it: duplicate,
	// invalid_name, invalid_label_value, conflict, name_collision, ...
	Reason string
	// Samples is how many samples the drop cost (a whole chunk when its
	// metadata is wrong, else one).
	Samples int
	// Cause names the family and, for one sample, its series.
	Cause string
}

func (d Drop) String() string {
	return fmt.Sprintf("%s (%d samples): %s", d.Reason, d.Samples, d.Cause)
}

// Conn is a plugin behind a real gRPC connection, configured, as Client
// returns it; Collect scrapes it.
type Conn struct {
	pluginv1.PluginServiceClient
	// Warnings are the remarks Configure returned (Config.Warn).
	Warnings []string

	opts Options
}

// Client starts p behind a real gRPC connection (the transport's service
// glue on both ends, over a Unix socket as go-plugin connects host and
// plugin, without its TLS) and configures it with opts. The connection
// closes with the test.
func Client(t testing.TB, p sdk.Plugin, opts Options) *Conn {
	t.Helper()
	c := &Conn{PluginServiceClient: connect(t, testhook.NewServer(p, sdk.Logger())), opts: opts}
	cfg, err := structpb.NewStruct(opts.Config)
	if err != nil {
		t.Fatalf("plugin config: %v", err)
	}
	resp, err := c.Configure(context.Background(), &pluginv1.ConfigureRequest{
		Config:          cfg,
		EnabledMetrics:  opts.EnabledMetrics,
		DisabledMetrics: opts.DisabledMetrics,
		MetricPrefix:    opts.MetricPrefix,
		Paths:           &pluginv1.Paths{Sysfs: opts.Sysfs, Procfs: opts.Procfs, Rootfs: opts.Rootfs},
		HostApiVersion:  transport.APIVersion,
		DeviceInclude:   opts.DeviceInclude,
		DeviceExclude:   opts.DeviceExclude,
	})
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	c.Warnings = resp.GetWarnings()
	return c
}

// connect serves srv on a Unix socket and returns a client of it. It does
// not use go-plugin's test connection, whose logger prints every DEBUG
// line of its connection handling to the test's stderr.
func connect(t testing.TB, srv pluginv1.PluginServiceServer) pluginv1.PluginServiceClient {
	t.Helper()
	// Not t.TempDir: a socket path must fit in 108 bytes, and test names
	// make long directories.
	dir, err := os.MkdirTemp("", "sdktest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "plugin.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	glue := &transport.GRPCPlugin{Impl: srv}
	server := plugin.DefaultGRPCServer(nil)
	t.Cleanup(server.Stop)
	if err := glue.GRPCServer(nil, server); err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve(l) }()
	// go-plugin's client options: no size limit but the one the host puts
	// on Collect (wire.MaxMessage, applied by Collect below).
	conn, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client, err := glue.GRPCClient(context.Background(), nil, conn)
	if err != nil {
		t.Fatal(err)
	}
	return client.(pluginv1.PluginServiceClient)
}

// Run starts p, configures it and collects once. Besides Collect's checks
// it fails the test for every family written that the Info catalogue
// lacks (unless opts.AllowUndeclared) or describes with another type or
// label names, and for catalogue entries the host could never expose.
func Run(t testing.TB, p sdk.Plugin, opts Options) *Result {
	t.Helper()
	c := Client(t, p, opts)
	info, err := c.Info(context.Background(), &pluginv1.InfoRequest{})
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	checkCatalogue(t, info)
	res := Collect(t, c, opts.Timeout)
	res.Info, res.Warnings = info, c.Warnings
	if !opts.AllowUndeclared {
		for _, name := range res.Undeclared(t, opts.MetricPrefix) {
			t.Errorf("family %s is written but not in the plugin's Info catalogue", name)
		}
	}
	checkAgainstCatalogue(t, res, opts.MetricPrefix)
	return res
}

// checkAgainstCatalogue fails the test for each family written with
// another type or other label names than its catalogue entry says: the
// catalogue is what `plexporter metrics` documents to operators.
func checkAgainstCatalogue(t testing.TB, res *Result, prefix string) {
	t.Helper()
	byName := map[string]*pluginv1.MetricDescriptor{}
	for _, d := range res.Info.GetMetrics() {
		byName[d.GetName()] = d
	}
	for _, mf := range res.Families(t) {
		d := byName[strings.TrimPrefix(mf.GetName(), prefix)]
		if d == nil || len(mf.GetMetric()) == 0 {
			continue // undeclared, or declared by a pattern only
		}
		if want := wire.DTOType(d.GetType()); mf.GetType() != want {
			t.Errorf("family %s is written as %s but its Info catalogue entry says %s", mf.GetName(), strings.ToLower(mf.GetType().String()), strings.ToLower(want.String()))
		}
		var labels []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		if !slices.Equal(labels, d.GetLabelNames()) {
			t.Errorf("family %s is written with labels %q but its Info catalogue entry says %q", mf.GetName(), labels, d.GetLabelNames())
		}
	}
}

// checkCatalogue fails the test for catalogue entries with a name no
// sample could carry past the guard (a '*' stands for any name part).
func checkCatalogue(t testing.TB, info *pluginv1.InfoResponse) {
	t.Helper()
	for _, d := range info.GetMetrics() {
		if !guard.ValidMetricName(strings.ReplaceAll(d.GetName(), "*", "x")) {
			t.Errorf("Info catalogue: invalid metric name %q", d.GetName())
		}
		if d.GetType() == pluginv1.MetricType_METRIC_TYPE_UNSPECIFIED {
			t.Errorf("Info catalogue: family %s has no type", d.GetName())
		}
		for _, l := range d.GetLabelNames() {
			if !guard.ValidLabelName(l) {
				t.Errorf("Info catalogue: family %s: invalid label name %q", d.GetName(), l)
			}
		}
	}
}

// Undeclared lists the families collected that the Info catalogue
// describes neither by name nor by a '*' pattern.
func (r *Result) Undeclared(t testing.TB, prefix string) []string {
	t.Helper()
	var out []string
	for _, mf := range r.Families(t) {
		name := strings.TrimPrefix(mf.GetName(), prefix)
		declared := false
		for _, d := range r.Info.GetMetrics() {
			if ok, _ := path.Match(d.GetName(), name); ok {
				declared = true
				break
			}
		}
		if !declared {
			out = append(out, mf.GetName())
		}
	}
	return out
}

// DefaultTimeout is a Collect's deadline unless the test gives one. It is
// not the host's (5 s): a deadline only matters when the test fails, and a
// machine loaded by other tests can take many times longer than a quiet
// one for a Collect that takes well under a second. A test about deadlines
// gives its own.
const DefaultTimeout = time.Minute

// Collect runs one Collect on a configured plugin and passes its batches
// through the host's guard. It fails the test (t.Errorf, so the result
// can still be inspected) for every drop, listed with its rule, family and
// series, and for every write the SDK refused (partial errors of
// collector "sdk"); a stream error or the plugin's own partial errors are
// the caller's to judge.
//
// c is normally a *Conn from Client; any other client is guarded with the
// host's default settings.
func Collect(t testing.TB, c pluginv1.PluginServiceClient, timeout time.Duration) *Result {
	t.Helper()
	var opts Options
	if conn, ok := c.(*Conn); ok {
		opts = conn.opts
	}
	if timeout == 0 {
		timeout = opts.Timeout
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The host's per-message limit, so a plugin whose messages the host
	// would refuse fails here too; no series or byte limits, since a
	// plugin's test wants all of its output.
	stream, err := c.Collect(ctx, &pluginv1.CollectRequest{}, wire.MaxMessage)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	res := &Result{maxLabelValueLen: opts.MaxLabelValueLen, prefix: opts.MetricPrefix}
	if f, err := metricfilter.New(opts.EnabledMetrics, opts.DisabledMetrics); err == nil {
		res.filter = f // a bad pattern failed Configure already
	}
	res.Batches, res.Errors, res.Status = wire.Drain(stream, wire.Limits{})
	_, res.Drops = res.guard()
	reportDrops(t, res.Drops)
	for _, e := range res.Errors {
		if e.GetCollector() == sdkCollector {
			t.Errorf("the SDK refused a write (the sample is not sent): %s", e.GetMessage())
		}
	}
	return res
}

// sdkCollector is the collector name of the Writer's misuse errors.
const sdkCollector = "sdk"

// maxDropsListed bounds the drops listed per rule: a loop that repeats a
// series repeats it thousands of times.
const maxDropsListed = 10

func reportDrops(t testing.TB, drops []Drop) {
	t.Helper()
	listed := map[string]int{}
	for _, d := range drops {
		if listed[d.Reason]++; listed[d.Reason] <= maxDropsListed {
			t.Errorf("the host's guard drops this plugin's output: %s", d)
		}
	}
	for reason, n := range listed {
		if n > maxDropsListed {
			t.Errorf("... and %d more drops for rule %s", n-maxDropsListed, reason)
		}
	}
}

// guard runs the batches through the host's guard as a host with default
// settings and no series cap would: the families it serves, and every drop.
func (r *Result) guard() (*guard.Result, []Drop) {
	var drops []Drop
	maxLen := r.maxLabelValueLen
	if maxLen == 0 {
		maxLen = guard.DefaultMaxLabelValueLen
	}
	// The host's allowlist, with the further names the catalogue selects
	// families by (known once Run has asked Info).
	in := guard.Input{Plugin: "plugin", Batches: r.Batches, SelectedBy: guard.SelectedBy(r.Info.GetMetrics(), r.prefix)}
	res := guard.Merge([]guard.Input{in}, guard.Options{
		Filter:           r.filter,
		MaxLabelValueLen: maxLen,
		ReservedPrefixes: guard.HostPrefixes(),
		Observe: func(k guard.DropKey, samples int, cause string) {
			drops = append(drops, Drop{Reason: k.Reason, Samples: samples, Cause: cause})
		},
	})
	return res, drops
}

// Families returns what the host would serve of the collected batches,
// as client_model families sorted by name: the batches after the guard.
func (r *Result) Families(t testing.TB) []*dto.MetricFamily {
	t.Helper()
	res, _ := r.guard()
	out := make([]*dto.MetricFamily, 0, len(res.Families))
	for _, f := range res.Families {
		mf := &dto.MetricFamily{Name: proto.String(f.Name), Help: proto.String(f.Help), Type: wire.DTOType(f.Type).Enum()}
		if f.Unit != "" {
			mf.Unit = proto.String(f.Unit)
		}
		for i := range f.Parts {
			p := &f.Parts[i]
			for j := range p.Samples() {
				mf.Metric = append(mf.Metric, p.Chunk.Metric(p.Index(j)))
			}
		}
		out = append(out, mf)
	}
	return out
}

// Text renders what the host would serve of the collected batches in the
// text format, sorted by family name, with expfmt.
func (r *Result) Text(t testing.TB) string {
	t.Helper()
	mfs := r.Families(t)
	sortFamilies(mfs)
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatalf("render %s: %v", mf.GetName(), err)
		}
	}
	return buf.String()
}

// Lint returns promlint's complaints about the exposition text.
func Lint(t testing.TB, text string) []promlint.Problem {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	return problems
}

// Golden compares got with the golden file at path (rewritten with -update).
func Golden(t testing.TB, got, path string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (run with -update to create it, then review it)", err)
	}
	if got != string(want) {
		t.Errorf("exposition differs from %s (run with -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

func sortFamilies(mfs []*dto.MetricFamily) {
	slices.SortStableFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
}

// lineDiff lists lines only in want (-) or only in got (+), in order.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	inW, inG := map[string]int{}, map[string]int{}
	for _, l := range wl {
		inW[l]++
	}
	for _, l := range gl {
		inG[l]++
	}
	var b strings.Builder
	for _, l := range wl {
		if inG[l] == 0 {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gl {
		if inW[l] == 0 {
			b.WriteString("+ " + l + "\n")
		}
	}
	if b.Len() == 0 {
		b.WriteString("(same lines, different order or count)\n")
	}
	return b.String()
}
