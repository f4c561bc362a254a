// Package sdktest runs a plugin through the real gRPC path inside a test and
// compares what it exposes with a reviewed golden file.
//
//	res := sdktest.Run(t, myplugin.New(), sdktest.Options{Sysfs: "testdata/sys"})
//	sdktest.Golden(t, res.Text(t), "testdata/metrics.golden")
//
// Goldens are rendered by prometheus/common/expfmt from client_model
// families, independently of the host's encoder. Run the test with -update
// to rewrite them, then review the diff like code.
package sdktest

import (
	"bytes"
	"context"
	"flag"
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
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/internal/batch"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
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
	Timeout         time.Duration // per Collect; default 10s
	// AllowUndeclared skips Run's check that every family the plugin
	// writes is in its Info catalogue (by name or by a '*' pattern). The
	// catalogue feeds `plexporter metrics` and the allowlist's typo warning.
	AllowUndeclared bool
}

// Result is one Info + Configure + Collect round trip.
type Result struct {
	Info    *pluginv1.InfoResponse
	Batches []*pluginv1.Batch
	Errors  []*pluginv1.CollectError
	// Status is the Collect stream's final error (nil when it ended OK).
	Status error
}

// Client starts p behind a real go-plugin gRPC connection and returns its
// client, configured with opts. The connection closes with the test.
func Client(t testing.TB, p sdk.Plugin, opts Options) pluginv1.PluginServiceClient {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, true, map[string]plugin.Plugin{
		transport.PluginName: &transport.GRPCPlugin{Impl: sdk.NewServer(p, nil)},
	})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(transport.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	c := raw.(pluginv1.PluginServiceClient)
	cfg, err := structpb.NewStruct(opts.Config)
	if err != nil {
		t.Fatalf("plugin config: %v", err)
	}
	_, err = c.Configure(context.Background(), &pluginv1.ConfigureRequest{
		Config:          cfg,
		EnabledMetrics:  opts.EnabledMetrics,
		DisabledMetrics: opts.DisabledMetrics,
		MetricPrefix:    opts.MetricPrefix,
		Paths:           &pluginv1.Paths{Sysfs: opts.Sysfs, Procfs: opts.Procfs, Rootfs: opts.Rootfs},
	})
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	return c
}

// Run starts p, configures it and collects once.
func Run(t testing.TB, p sdk.Plugin, opts Options) *Result {
	t.Helper()
	c := Client(t, p, opts)
	info, err := c.Info(context.Background(), &pluginv1.InfoRequest{})
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	res := Collect(t, c, opts.Timeout)
	res.Info = info
	if !opts.AllowUndeclared {
		for _, name := range res.Undeclared(t, opts.MetricPrefix) {
			t.Errorf("family %s is written but not in the plugin's Info catalogue", name)
		}
	}
	return res
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

// Collect runs one Collect on an already configured client.
func Collect(t testing.TB, c pluginv1.PluginServiceClient, timeout time.Duration) *Result {
	t.Helper()
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The host's per-message limit, so a plugin whose messages the host
	// would refuse fails here too; no series or byte limits, since a
	// plugin's test wants all of its output.
	stream, err := c.Collect(ctx, &pluginv1.CollectRequest{}, batch.MaxMessage)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	res := &Result{}
	res.Batches, res.Errors, res.Status = batch.Drain(stream, batch.Limits{})
	return res
}

// Families converts the collected batches to client_model families.
func (r *Result) Families(t testing.TB) []*dto.MetricFamily {
	t.Helper()
	mfs, err := batch.Families(r.Batches)
	if err != nil {
		t.Fatalf("malformed batch: %v", err)
	}
	return mfs
}

// Text renders the collected families in the text format, sorted by family
// name, with expfmt.
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
