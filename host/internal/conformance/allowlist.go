package conformance

import (
	"maps"
	"slices"
	"strings"

	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

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
	by := guard.SelectedBy(c.info.GetMetrics(), s.MetricPrefix) // the events a family is selected by, as the host applies them
	var outside []string
	for _, name := range slices.Sorted(maps.Keys(col.families)) {
		if !filter.AllowFamily(name, by[name]) {
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
	c.prefixed = col
	c.pass(rule, "with metric_prefix %q: %d families, all prefixed", checkPrefix, len(col.families))
}

// prefixedAllowlist checks that the allowlist is matched as the host
// matches it when a metric_prefix is set: against the name as exposed.
// The families metric-prefix's process sent (prefixed) are the allowlist
// of one new process, which must send some of them and nothing else; their
// bare names are the allowlist of another, which must send nothing, since
// the host would hide whatever it sent (the SDK once matched both, and
// collected families no operator could see). All of them, not one: a
// plugin whose families come with events (eBPF) may lack any one family in
// a fresh process.
func (c *checker) prefixedAllowlist() {
	const rule = "allowlist.prefixed"
	if c.base == nil || c.base.err != nil {
		c.skip(rule, "the first Collect failed")
		return
	}
	if r := c.results["metric-prefix"]; r.Status != Pass {
		c.skip(rule, "metric-prefix did not pass: the prefix must be applied before the allowlist can match it")
		return
	}
	if len(c.prefixed.families) == 0 {
		c.skip(rule, "with metric_prefix %q the plugin sent no family (%s): nothing to filter", checkPrefix, c.prefixed.summary(c.p.Name))
		return
	}
	exposed := slices.Sorted(maps.Keys(c.prefixed.families))
	bare := make([]string, len(exposed))
	for i, name := range exposed {
		bare[i] = strings.TrimPrefix(name, checkPrefix)
	}

	s := c.s
	s.MetricPrefix, s.Enabled, s.Disabled = checkPrefix, exposed, nil
	col, ok := c.collectWith(rule, s)
	if !ok {
		return
	}
	filter, err := metricfilter.New(exposed, nil)
	if err != nil {
		panic(err) // names the plugin sent, and the guard let through
	}
	sent := slices.Sorted(maps.Keys(col.families))
	if len(sent) == 0 {
		c.fail(rule, "with metric_prefix %q and the allowlist %v (the families it sent unfiltered) the plugin sent no family (%s): match the allowlist against the name as exposed, prefix included", checkPrefix, exposed, col.summary(c.p.Name))
		return
	}
	by := guard.SelectedBy(c.info.GetMetrics(), checkPrefix)
	allowed := func(name string) bool { return filter.AllowFamily(name, by[name]) }
	if outside := slices.DeleteFunc(slices.Clone(sent), allowed); len(outside) > 0 {
		c.fail(rule, "with metric_prefix %q and the allowlist %v the plugin sent families outside it: %s", checkPrefix, exposed, strings.Join(outside, ", "))
		return
	}

	s.Enabled = bare
	col, ok = c.collectWith(rule, s)
	if !ok {
		return
	}
	if len(col.families) > 0 {
		c.fail(rule, "with metric_prefix %q and the allowlist %v (the names without it) the plugin sent %s, which the host hides: match the allowlist against the name as exposed, prefix included", checkPrefix, bare, strings.Join(slices.Sorted(maps.Keys(col.families)), ", "))
		return
	}
	c.pass(rule, "with metric_prefix %q: the exposed names select %d of %d families, the bare names none", checkPrefix, len(sent), len(exposed))
}

// collectWith collects once from a new process configured with s; false
// (the rule failed) when it could not.
func (c *checker) collectWith(rule string, s supervise.Settings) (*collection, bool) {
	in, err := c.configured(s)
	if err != nil {
		c.fail(rule, "with metric_prefix %q and the allowlist %v: %v", s.MetricPrefix, s.Enabled, err)
		return nil, false
	}
	defer c.retire(in)
	col := c.collect(in, s)
	if col.err != nil {
		c.fail(rule, "with metric_prefix %q and the allowlist %v, Collect failed after %v: %v", s.MetricPrefix, s.Enabled, round(col.took), col.err)
		return nil, false
	}
	return col, true
}
