package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/scrape"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// startAll starts every discovered plugin and waits for its first start.
func startAll(fl *fleet.Fleet) error {
	if err := fl.Reconcile(); err != nil {
		return err
	}
	for _, s := range fl.Supervisors() {
		<-s.FirstAttempt()
	}
	return nil
}

// listPlugins implements `plexporter plugins`.
func listPlugins(fl *fleet.Fleet, filter *metricfilter.Filter, maxLabelLen int) int {
	if err := startAll(fl); err != nil {
		fmt.Fprintln(os.Stderr, "plexporter:", err)
		return 1
	}
	defer fl.StopAll()
	sups := map[string]*supervise.Supervisor{}
	for _, s := range fl.Supervisors() {
		sups[s.Plugin().Name] = s
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tSTATE\tSERIES\tPATH\tLAST ERROR")
	for _, st := range fl.Statuses() {
		series, lastErr := "-", st.LastError
		if sup := sups[st.Name]; sup != nil && st.Up() {
			c := sup.Collect(context.Background())
			res := guard.Merge([]guard.Input{{Plugin: st.Name, Batches: c.Batches, MaxSeries: sup.Settings().MaxSeries, SelectedBy: sup.SelectedBy()}}, guard.Options{Filter: filter, MaxLabelValueLen: maxLabelLen})
			series = fmt.Sprint(res.Series[st.Name])
			switch {
			case c.Err != nil:
				lastErr = "collect: " + c.Err.Error()
				// The instance may have died in this collect: show what
				// the supervisor makes of it, not the state from before.
				if now := settledAfterFailure(sup); !now.Up() {
					st.Status = now
					lastErr = "died during its collect (" + c.Err.Error() + "): " + now.LastError
				}
			case len(c.Errors) > 0:
				lastErr = partialErrors(c.Errors)
			}
		}
		if st.Rejected != "" {
			lastErr = "new settings rejected, running on the previous ones: " + st.Rejected
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, orDash(st.Info.GetVersion()), st.State, series, st.Path, oneLine(lastErr))
	}
	for _, r := range fl.Refused() {
		fmt.Fprintf(tw, "%s\t-\trefused\t-\t%s\t%s\n", r.Plugin.Name, r.Plugin.Path, oneLine(r.Reason))
	}
	tw.Flush()
	return 0
}

// settledAfterFailure is the supervisor's status once it has noticed
// whether a plugin whose collect failed is still alive: the exit of a
// process that died in the collect is seen when it is reaped, a moment
// after the broken stream. A plugin still running after diedWithin is
// taken as alive (its collect failed, it did not die).
func settledAfterFailure(sup *supervise.Supervisor) supervise.Status {
	deadline := time.Now().Add(diedWithin)
	for {
		st := sup.Status()
		if !st.Up() || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const diedWithin = 2 * time.Second

// partialErrors sums up a Collect's partial errors for LAST ERROR: a
// plugin that answers but whose sources are denied or broken read nothing,
// and must not look healthy here.
func partialErrors(errs []*pluginv1.CollectError) string {
	first := errs[0]
	s := fmt.Sprintf("collect %s: %s", first.GetCollector(), first.GetMessage())
	if len(errs) > 1 {
		s += fmt.Sprintf(" (and %d more partial errors)", len(errs)-1)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listMetrics implements `plexporter metrics`.
func listMetrics(fl *fleet.Fleet, markdown bool) int {
	if err := startAll(fl); err != nil {
		fmt.Fprintln(os.Stderr, "plexporter:", err)
		return 1
	}
	defer fl.StopAll()
	if markdown {
		fmt.Println("| plugin | metric | type | labels | help |")
		fmt.Println("|---|---|---|---|---|")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	row := func(plugin, name, typ string, labels []string, help string) {
		if markdown {
			fmt.Printf("| %s | `%s` | %s | %s | %s |\n", plugin, name, typ, strings.Join(labels, ","), strings.ReplaceAll(help, "|", `\|`))
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t{%s}\t%s\n", plugin, name, typ, strings.Join(labels, ","), help)
		}
	}
	// The host's own families first, under its own name: they are on
	// every /metrics, whichever plugins run.
	for _, d := range scrape.Catalogue() {
		row(hostCatalogueName, d.Name, typeName(d.Type), d.Labels, d.Help)
	}
	for _, s := range fl.Supervisors() {
		st := s.Status()
		for _, m := range st.Info.GetMetrics() {
			row(st.Name, m.GetName(), typeName(m.GetType()), m.GetLabelNames(), m.GetHelp())
		}
	}
	tw.Flush()
	return 0
}

// typeName is a metric type as a # TYPE line writes it ("counter").
func typeName(t pluginv1.MetricType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "METRIC_TYPE_"))
}

// hostCatalogueName is the plugin column of the host's own families in
// `plexporter metrics`.
const hostCatalogueName = "(host)"

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
