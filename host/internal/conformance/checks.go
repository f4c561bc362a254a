package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/batch"
	"github.com/plexporter/plexporter/internal/merge"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
	"github.com/plexporter/plexporter/sdk/transport"
)

func cloneMap(m map[string]any) map[string]any { return maps.Clone(m) }

// refuses starts a process with config cfg and expects Configure to answer
// INVALID_ARGUMENT with a message, and the process to live on.
func (c *checker) refuses(rule, what string, cfg map[string]any) {
	raw, err := structpb.NewStruct(cfg)
	if err != nil {
		c.skip(rule, "cannot encode the config: %v", err)
		return
	}
	s := c.s
	s.Config = raw
	in, _, err := c.start(s)
	if err != nil {
		c.fail(rule, "the plugin did not start again: %v", err)
		return
	}
	defer c.retire(in)
	if _, err := in.client.Info(in.ctx, &pluginv1.InfoRequest{}); err != nil {
		c.fail(rule, "Info: %v", err)
		return
	}
	_, err = in.client.Configure(in.ctx, s.ConfigureRequest())
	code, msg := status.Code(err), status.Convert(err).Message()
	// A crash shows as a broken connection, or as an answer just before
	// the process dies: give it a moment to.
	exited := false
	select {
	case <-in.proc.Exited():
		exited = true
	case <-time.After(100 * time.Millisecond):
	}
	switch {
	case exited:
		c.fail(rule, "given %s, the plugin crashed (%v; Configure: %v)", what, exitText(in.proc.ExitError()), err)
	case err == nil:
		c.fail(rule, "given %s, Configure succeeded: a typo in an operator's config would go unnoticed", what)
	case code != codes.InvalidArgument:
		c.fail(rule, "given %s, Configure answered %s, not INVALID_ARGUMENT: the host would restart the plugin in a loop instead of reporting it misconfigured (%s)", what, code, msg)
	case strings.TrimSpace(msg) == "":
		c.fail(rule, "given %s, Configure answered INVALID_ARGUMENT with no message: the operator is not told what is wrong", what)
	default:
		c.pass(rule, "given %s: %q", what, msg)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// cookie runs the binary without the handshake environment, as someone
// running it by hand would: it should say so and exit.
func (c *checker) cookie() {
	const rule = "handshake.cookie"
	if c.s.Sandbox != nil {
		c.skip(rule, "sandboxed: the runner starts the plugin only in its sandbox, and this check would need it started outside (--sandbox=off checks it)")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cookieWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.p.Target)
	cmd.Args[0] = c.p.Path
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		c.fail(rule, "still running %v after it was started without %s", cookieWait, transport.Handshake.MagicCookieKey)
	case strings.Contains(stdout.String(), "|grpc|"):
		c.fail(rule, "printed a handshake line without %s", transport.Handshake.MagicCookieKey)
	case err == nil:
		c.fail(rule, "exited with status 0 without %s: scripts cannot tell it refused", transport.Handshake.MagicCookieKey)
	case errors.As(err, &exit):
		line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		if line == "" {
			c.fail(rule, "exited (%v) without %s but wrote no message on stderr", err, transport.Handshake.MagicCookieKey)
			return
		}
		c.pass(rule, "%v: %s", err, truncate(line, 200))
	default:
		c.fail(rule, "cannot run it: %v", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// catalogue runs one sample of every catalogue entry through the guard: an
// entry is valid exactly when a sample of it would be exposed. A glob
// (rdma_*_total) is checked with its wildcards made a letter.
func (c *checker) catalogue(descs []*pluginv1.MetricDescriptor) {
	const rule = "info.catalogue"
	if len(descs) == 0 {
		c.skip(rule, "the catalogue is empty")
		return
	}
	seen := map[string]bool{}
	b := newBatchBuilder()
	for _, d := range descs {
		if seen[d.GetName()] {
			c.fail(rule, "%s is listed twice", d.GetName())
			return
		}
		seen[d.GetName()] = true
		b.sample(d)
	}
	res := c.guard(nil, []*pluginv1.Batch{b.b})
	if detail := drops(res, c.p.Name, nil); detail != "" {
		c.fail(rule, "%d entries, a sample of which the host would drop: %s", len(descs), detail)
		return
	}
	c.pass(rule, "%d entries", len(descs))
}

// collection is one Collect's outcome.
type collection struct {
	batches  []*pluginv1.Batch
	errors   []*pluginv1.CollectError
	err      error
	took     time.Duration
	merged   *merge.Result
	families map[string]int // samples per family name, as sent
}

func (col *collection) series(plugin string) int { return col.merged.Series[plugin] }

// summary describes what the collect brought, for details.
func (col *collection) summary(plugin string) string {
	s := fmt.Sprintf("%d series of %d families", col.series(plugin), len(col.families))
	if n := len(col.errors); n > 0 {
		e := col.errors[0]
		s += fmt.Sprintf(", %d partial errors (first: %s: %s)", n, e.GetCollector(), truncate(e.GetMessage(), 200))
	}
	return s
}

// collect runs one Collect with settings s's timeout and limits, as the
// supervisor does, and passes its batches through the guard.
func (c *checker) collect(in *instance, s supervise.Settings) *collection {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	col := &collection{}
	began := time.Now()
	stream, err := in.client.Collect(ctx, &pluginv1.CollectRequest{}, batch.MaxMessage)
	if err == nil {
		col.batches, col.errors, err = batch.Drain(stream, batch.LimitsFor(s.MaxSeries))
	}
	col.err, col.took = err, time.Since(began)
	col.families = familiesSent(col.batches)
	col.merged = c.guard(&s, col.batches)
	return col
}

// guard merges batches as a scrape would, with s's filter (nil: none).
func (c *checker) guard(s *supervise.Settings, batches []*pluginv1.Batch) *merge.Result {
	var filter *metricfilter.Filter
	maxSeries := 0
	if s != nil {
		filter, _ = metricfilter.New(s.Enabled, s.Disabled) // the host checked its flags
		maxSeries = s.MaxSeries
	}
	return merge.Merge([]merge.Input{{Plugin: c.p.Name, Batches: batches, MaxSeries: maxSeries}},
		merge.Options{Filter: filter, MaxLabelValueLen: c.o.MaxLabelValueLen, ReservedPrefixes: c.o.ReservedPrefixes})
}

// drops describes the guard's drops for plugin, but those for the reasons
// in except; "" for none.
func drops(res *merge.Result, plugin string, except []string) string {
	var parts []string
	for _, k := range slices.SortedFunc(maps.Keys(res.Drops), func(a, b merge.DropKey) int { return strings.Compare(a.Reason, b.Reason) }) {
		if k.Plugin != plugin || slices.Contains(except, k.Reason) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s)", res.Drops[k], k.Reason, res.Causes[k]))
	}
	return strings.Join(parts, "; ")
}

// familiesSent counts the samples per family name in batches, as the plugin
// wrote them: before the filter and the guard.
func familiesSent(batches []*pluginv1.Batch) map[string]int {
	out := map[string]int{}
	for _, b := range batches {
		for _, ch := range b.GetFamilies() {
			if len(ch.GetValues()) == 0 {
				continue
			}
			name := fmt.Sprintf("<string index %d outside the table>", ch.GetName())
			if int(ch.GetName()) < len(b.GetStrings()) {
				name = batch.TableString(b.GetStrings()[ch.GetName()])
			}
			out[name] += len(ch.GetValues())
		}
	}
	return out
}

func (c *checker) collectRules(main *instance) {
	base := c.collect(main, c.s)
	c.base = base
	if base.err != nil {
		hint := ""
		if base.took >= c.s.Timeout {
			hint = fmt.Sprintf(" (the collect timeout is %v: plugins.%s.timeout, else --scrape.timeout)", c.s.Timeout, c.p.Name)
		}
		c.fail("collect", "after %v%s: %v; %s", round(base.took), hint, base.err, base.summary(c.p.Name))
	} else {
		c.durations = append(c.durations, base.took)
		c.pass("collect", "in %v: %s", round(base.took), base.summary(c.p.Name))
	}

	// What the first collect sent is judged even if it failed half-way:
	// the host exposes what arrived.
	if len(base.families) == 0 {
		why := "the plugin sent no sample (" + base.summary(c.p.Name) + "): nothing to judge"
		for _, r := range []string{"collect.guard", "collect.duplicates", "collect.catalogue"} {
			c.skip(r, "%s", why)
		}
	} else {
		if d := drops(base.merged, c.p.Name, []string{merge.ReasonDuplicate}); d != "" {
			c.fail("collect.guard", "the host drops: %s", d)
		} else {
			c.pass("collect.guard", "%s, none dropped", base.summary(c.p.Name))
		}
		if n := base.merged.Drops[merge.DropKey{Plugin: c.p.Name, Reason: merge.ReasonDuplicate}]; n > 0 {
			c.fail("collect.duplicates", "%d samples repeat a series sent before (%s)", n, base.merged.Causes[merge.DropKey{Plugin: c.p.Name, Reason: merge.ReasonDuplicate}])
		} else {
			c.pass("collect.duplicates", "%d series, each once", base.series(c.p.Name))
		}
		c.sentInCatalogue(base)
	}

	if base.err != nil {
		for _, r := range []string{"collect.stable", "collect.cancel"} {
			c.skip(r, "the first Collect failed")
		}
		return
	}
	c.stable(main)
	c.cancel(main)
}

func (c *checker) sentInCatalogue(col *collection) {
	const rule = "collect.catalogue"
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(col.families)) {
		if !inCatalogue(c.info.GetMetrics(), strings.TrimPrefix(name, c.s.MetricPrefix)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		c.fail(rule, "%d of %d families sent are not in Info's catalogue: %s (plexporter metrics does not show them, and an allowlist pattern for them is warned about as matching nothing)", len(missing), len(col.families), strings.Join(missing, ", "))
		return
	}
	c.pass(rule, "%d families, all listed", len(col.families))
}

// inCatalogue reports whether a family name (as written, prefix removed)
// is listed, literally or by a glob.
func inCatalogue(descs []*pluginv1.MetricDescriptor, name string) bool {
	for _, d := range descs {
		if d.GetName() == name {
			return true
		}
		if strings.ContainsAny(d.GetName(), "*?[") {
			if ok, err := pathMatch(d.GetName(), name); err == nil && ok {
				return true
			}
		}
	}
	return false
}

func (c *checker) stable(main *instance) {
	const rule = "collect.stable"
	counts := []int{c.base.series(c.p.Name)}
	for i := range repeats {
		col := c.collect(main, c.s)
		if col.err != nil {
			c.fail(rule, "Collect %d of %d after the first failed after %v: %v", i+1, repeats, round(col.took), col.err)
			return
		}
		c.durations = append(c.durations, col.took)
		counts = append(counts, col.series(c.p.Name))
	}
	if !main.alive() {
		c.fail(rule, "the process exited (%v) while the host wanted it", exitText(main.proc.ExitError()))
		return
	}
	growing := true
	for i := 1; i < len(counts); i++ {
		growing = growing && counts[i] > counts[i-1]
	}
	if growing {
		c.fail(rule, "the series count grows at every Collect: %v (state kept across collects? each collect should write what is there now)", counts)
		return
	}
	c.pass(rule, "series counts %v", counts)
}

// cancel cancels a Collect once it has sent its first message (or after
// cancelAfter), as the host does at its deadline or its limits, then
// checks that the next Collect is not held up by the abandoned one.
func (c *checker) cancel(main *instance) {
	const rule = "collect.cancel"
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	stream, err := main.client.Collect(ctx, &pluginv1.CollectRequest{}, batch.MaxMessage)
	ended := false
	if err == nil {
		t := time.AfterFunc(cancelAfter, cancel)
		_, err = stream.Recv()
		t.Stop()
		ended = err != nil && status.Code(err) != codes.Canceled // the stream was over already
	}
	cancel()
	cancelledAt := time.Since(began)
	next := c.collect(main, c.s)
	usual := median(c.durations)
	grace := max(cancelGrace, usual/2)
	how := fmt.Sprintf("cancelled after %v", round(cancelledAt))
	if ended {
		how = fmt.Sprintf("the Collect had ended before the cancel (%v): only the next Collect was checked", round(cancelledAt))
	}
	switch {
	case next.err != nil:
		c.fail(rule, "%s; the next Collect failed after %v: %v", how, round(next.took), next.err)
	case next.took > usual+grace:
		c.fail(rule, "%s; the next Collect took %v, %v usually: the plugin went on with the cancelled one (stop reading when the call's context ends)", how, round(next.took), round(usual))
	case !main.alive():
		c.fail(rule, "%s; the process exited: %v", how, exitText(main.proc.ExitError()))
	default:
		c.pass(rule, "%s; the next Collect took %v (%v usually)", how, round(next.took), round(usual))
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

// allowlists configure a process each with an allowlist of one family the
// plugin sent, and with one that matches nothing, and count the families
// sent that the allowlist excludes.
func (c *checker) allowlists() {
	if c.base == nil || c.base.err != nil {
		c.skip("allowlist.one", "the first Collect failed")
		c.skip("allowlist.none", "the first Collect failed")
		return
	}
	if len(c.base.merged.Families) == 0 {
		why := "the plugin exposed no family unfiltered (" + c.base.summary(c.p.Name) + "): nothing to filter"
		c.skip("allowlist.one", "%s", why)
		c.skip("allowlist.none", "%s", why)
		return
	}
	one := c.base.merged.Families[0].Name
	c.allowlist("allowlist.one", []string{one})
	c.allowlist("allowlist.none", []string{nothingMatches})
}

func (c *checker) allowlist(rule string, enabled []string) {
	s := c.s
	s.Enabled, s.Disabled = enabled, nil
	in, err := c.configured(s)
	if err != nil {
		c.fail(rule, "with the allowlist %v: %v", enabled, err)
		return
	}
	defer c.retire(in)
	col := c.collect(in, s)
	if col.err != nil {
		c.fail(rule, "with the allowlist %v, Collect failed after %v: %v", enabled, round(col.took), col.err)
		return
	}
	filter, err := metricfilter.New(enabled, nil)
	if err != nil {
		panic(err) // the runner's own patterns
	}
	var outside []string
	for _, name := range slices.Sorted(maps.Keys(col.families)) {
		if !filter.Allow(name) {
			outside = append(outside, name)
		}
	}
	if len(outside) > 0 {
		c.fail(rule, "with the allowlist %v the plugin sent %d families, %d outside it: %s (read only the sources of enabled families; the host hides the rest, at the cost of reading them)", enabled, len(col.families), len(outside), strings.Join(outside, ", "))
		return
	}
	c.pass(rule, "with the allowlist %v: %d families sent of %d unfiltered", enabled, len(col.families), len(c.base.families))
}

// checkPrefix is the metric_prefix the metric-prefix rule configures.
const checkPrefix = "check_"

// prefixRule configures a process with a metric_prefix (and no filter,
// which would match the prefixed names) and looks for families sent
// without it.
func (c *checker) prefixRule() {
	const rule = "metric-prefix"
	if c.base == nil || c.base.err != nil {
		c.skip(rule, "the first Collect failed")
		return
	}
	if len(c.base.families) == 0 {
		c.skip(rule, "the plugin sent no sample unprefixed (%s): nothing to compare", c.base.summary(c.p.Name))
		return
	}
	s := c.s
	s.MetricPrefix, s.Enabled, s.Disabled = checkPrefix, nil, nil
	in, err := c.configured(s)
	if err != nil {
		c.fail(rule, "with metric_prefix %q: %v", checkPrefix, err)
		return
	}
	defer c.retire(in)
	col := c.collect(in, s)
	if col.err != nil {
		c.fail(rule, "with metric_prefix %q, Collect failed after %v: %v", checkPrefix, round(col.took), col.err)
		return
	}
	var bare []string
	for _, name := range slices.Sorted(maps.Keys(col.families)) {
		if !strings.HasPrefix(name, checkPrefix) {
			bare = append(bare, name)
		}
	}
	if len(bare) > 0 {
		c.fail(rule, "with metric_prefix %q, %d of %d families sent lack it: %s (plugins.<name>.metric_prefix is how an operator keeps two plugins' families apart)", checkPrefix, len(bare), len(col.families), strings.Join(bare, ", "))
		return
	}
	c.pass(rule, "with metric_prefix %q: %d families, all prefixed", checkPrefix, len(col.families))
}

// stopRule stops a configured process as the host does (close the
// connection, go-plugin's GRPCController/Shutdown) and times its exit: the
// host kills the process group after stopGrace.
func (c *checker) stopRule() {
	const rule = "stop"
	in, err := c.configured(c.s)
	if err != nil {
		c.fail(rule, "%v", err)
		return
	}
	began := time.Now()
	c.retire(in)
	select {
	case <-in.proc.Exited():
	case <-time.After(stopGrace + 3*time.Second):
	}
	took := time.Since(began)
	// go-plugin gives up at stopGrace and kills; an exit that late was not
	// the plugin's own.
	if took >= stopGrace-100*time.Millisecond {
		c.fail(rule, "still running %v after the host closed the connection: killed (exit when the connection closes or on plugin.GRPCController/Shutdown)", round(took))
		return
	}
	c.pass(rule, "in %v", round(took))
}

// lifeline closes the main process's lifeline, leaving the connection
// open, and waits for the plugin to exit.
func (c *checker) lifeline(main *instance) {
	const rule = "lifeline"
	if !main.alive() {
		c.skip(rule, "the process exited before: %v", exitText(main.proc.ExitError()))
		return
	}
	began := time.Now()
	main.proc.CloseLifeline()
	select {
	case <-main.proc.Exited():
		c.pass(rule, "in %v", round(time.Since(began)))
	case <-time.After(lifelineWait):
		c.fail(rule, "still running %v after fd 3 (%s) read EOF: a plugin whose host died would live on", lifelineWait, transport.LifelineEnv)
	}
}
