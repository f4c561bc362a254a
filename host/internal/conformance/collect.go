package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// collection is one Collect's outcome.
type collection struct {
	batches  []*pluginv1.Batch
	errors   []*pluginv1.CollectError
	err      error
	took     time.Duration
	merged   *guard.Result
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
	stream, err := in.client.Collect(ctx, &pluginv1.CollectRequest{}, wire.MaxMessage)
	if err == nil {
		col.batches, col.errors, err = wire.Drain(stream, wire.LimitsFor(s.MaxSeries))
	}
	col.err, col.took = err, time.Since(began)
	in.lastCollect = time.Now()
	col.families = familiesSent(col.batches)
	col.merged = c.guard(&s, col.batches)
	return col
}

// guard merges batches as a scrape would, with s's filter (nil: none).
func (c *checker) guard(s *supervise.Settings, batches []*pluginv1.Batch) *guard.Result {
	var filter *metricfilter.Filter
	var selectedBy map[string][]string
	maxSeries := 0
	if s != nil {
		filter, _ = metricfilter.New(s.Enabled, s.Disabled) // the host checked its flags
		maxSeries = s.MaxSeries
		selectedBy = guard.SelectedBy(c.info.GetMetrics(), s.MetricPrefix)
	}
	return guard.Merge([]guard.Input{{Plugin: c.p.Name, Batches: batches, MaxSeries: maxSeries, SelectedBy: selectedBy}},
		guard.Options{Filter: filter, MaxLabelValueLen: c.o.MaxLabelValueLen, ReservedPrefixes: c.o.ReservedPrefixes})
}

// drops describes the guard's drops for plugin, but those for the reasons
// in except; "" for none.
func drops(res *guard.Result, plugin string, except []string) string {
	var parts []string
	for _, k := range slices.SortedFunc(maps.Keys(res.Drops), func(a, b guard.DropKey) int { return strings.Compare(a.Reason, b.Reason) }) {
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
				name = wire.TableString(b.GetStrings()[ch.GetName()])
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
		if d := drops(base.merged, c.p.Name, []string{guard.ReasonDuplicate}); d != "" {
			c.fail("collect.guard", "the host drops: %s", d)
		} else {
			c.pass("collect.guard", "%s, none dropped", base.summary(c.p.Name))
		}
		if n := base.merged.Drops[guard.DropKey{Plugin: c.p.Name, Reason: guard.ReasonDuplicate}]; n > 0 {
			c.fail("collect.duplicates", "%d samples repeat a series sent before (%s)", n, base.merged.Causes[guard.DropKey{Plugin: c.p.Name, Reason: guard.ReasonDuplicate}])
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

// cancel cancels a Collect once it has sent its first message (or half-way
// through its usual time), as the host does at its deadline or its limits, then
// checks that the next Collect is not held up by the abandoned one.
func (c *checker) cancel(main *instance) {
	const rule = "collect.cancel"
	usual := median(c.durations)
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	stream, err := main.client.Collect(ctx, &pluginv1.CollectRequest{}, wire.MaxMessage)
	ended := false
	if err == nil {
		// Half-way through a collect that sends nothing before its end: by
		// then the plugin is surely at work on it, even on a loaded machine.
		t := time.AfterFunc(max(cancelAfter, usual/2), cancel)
		_, err = stream.Recv()
		t.Stop()
		ended = err != nil && status.Code(err) != codes.Canceled // the stream was over already
	}
	cancel()
	cancelledAt := time.Since(began)
	next := c.collect(main, c.s)
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
