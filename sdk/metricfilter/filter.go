// Package metricfilter decides which metric families are enabled, NIXL style:
// comma-separated glob patterns over family names as exposed (a plugin's
// metric_prefix included: what an operator sees in /metrics), an optional
// denylist, and "everything" when no allowlist is set. As in NIXL, a family
// may also be selected by further names (AllowFamily): the event it is
// derived from selects each of its families, so "agent_tx_bytes" selects the
// counter agent_tx_bytes_total and the gauge agent_tx_last_bytes alike.
//
// The host and the SDK share this package so that a family the host would
// drop is never collected by a plugin in the first place (allowlist pushdown).
package metricfilter

import (
	"fmt"
	"path"
	"strings"
)

// Filter is immutable after New and safe for concurrent use.
type Filter struct {
	allow []string // empty: everything allowed
	deny  []string
}

// New builds a Filter from allow and deny patterns. Patterns use path.Match
// syntax (*, ?, [...]); surrounding blanks and empty tokens are ignored.
func New(allow, deny []string) (*Filter, error) {
	f := &Filter{}
	var err error
	if f.allow, err = clean(allow); err != nil {
		return nil, fmt.Errorf("enabled metrics: %w", err)
	}
	if f.deny, err = clean(deny); err != nil {
		return nil, fmt.Errorf("disabled metrics: %w", err)
	}
	return f, nil
}

// Split turns a comma-separated list (as in PLEXPORTER_ENABLED_METRICS) into tokens.
func Split(list string) []string {
	var out []string
	for _, tok := range strings.Split(list, ",") {
		if tok = strings.TrimSpace(tok); tok != "" {
			out = append(out, tok)
		}
	}
	return out
}

func clean(patterns []string) ([]string, error) {
	var out []string
	for _, p := range patterns {
		for _, tok := range Split(p) {
			if _, err := path.Match(tok, ""); err != nil {
				return nil, fmt.Errorf("bad pattern %q: %w", tok, err)
			}
			out = append(out, tok)
		}
	}
	return out, nil
}

// Allow reports whether the family is enabled. name is the family name as
// exposed (the metric_prefix included; counters end in _total); it matches a pattern if either the name or
// its base name (without _total) does, so "rdma_port_rcv_data" and
// "rdma_port_rcv_data_total" both select the counter. A histogram or summary
// is selected by its family name and so brings all of its _bucket, _sum,
// _count series.
func (f *Filter) Allow(name string) bool {
	if f == nil {
		return true
	}
	if len(f.allow) > 0 && !matchAny(f.allow, name) {
		return false
	}
	return !matchAny(f.deny, name)
}

// AllowFamily is Allow for a family that further names select too (the
// catalogue's selected_by, all as exposed): it is enabled when the
// allowlist is empty or one of its patterns matches the name or any of
// them, unless the denylist matches the name or every one of them (a
// family that several events feed, such as NIXL's agent_errors_total, stays
// while one of them is not denied). With no further names it is Allow.
func (f *Filter) AllowFamily(name string, selectedBy []string) bool {
	if f == nil {
		return true
	}
	if len(f.allow) > 0 && !matchAny(f.allow, name) && !anyMatch(f.allow, selectedBy) {
		return false
	}
	return !matchAny(f.deny, name) && (len(selectedBy) == 0 || !allMatch(f.deny, selectedBy))
}

// anyMatch reports whether a pattern matches one of the names.
func anyMatch(patterns, names []string) bool {
	for _, n := range names {
		if matchAny(patterns, n) {
			return true
		}
	}
	return false
}

// allMatch reports whether patterns match every one of the names.
func allMatch(patterns, names []string) bool {
	for _, n := range names {
		if !matchAny(patterns, n) {
			return false
		}
	}
	return true
}

// AllowAll reports whether the filter lets every family through.
func (f *Filter) AllowAll() bool { return f == nil || (len(f.allow) == 0 && len(f.deny) == 0) }

// Allowed returns the allowlist patterns (nil when everything is allowed).
func (f *Filter) Allowed() []string {
	if f == nil {
		return nil
	}
	return f.allow
}

// Denied returns the denylist patterns.
func (f *Filter) Denied() []string {
	if f == nil {
		return nil
	}
	return f.deny
}

// Unmatched returns the allow and deny patterns that select none of the
// given family names, so callers can warn about typos once. A family name
// with a '*' describes families named at run time (e.g. "rdma_*_total"); a
// pattern sharing its literal prefix is not reported, since it may match
// one of them.
func (f *Filter) Unmatched(families []string) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, list := range [][]string{f.allow, f.deny} {
	patterns:
		for _, p := range list {
			for _, name := range families {
				if matchOne(p, name) || (strings.Contains(name, "*") && prefixesOverlap(p, name)) {
					continue patterns
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// prefixesOverlap reports whether the literal prefixes (up to the first
// wildcard) of two globs are compatible.
func prefixesOverlap(a, b string) bool {
	pa, pb := literalPrefix(a), literalPrefix(b)
	return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
}

func literalPrefix(glob string) string {
	if i := strings.IndexAny(glob, "*?[\\"); i >= 0 {
		return glob[:i]
	}
	return glob
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if matchOne(p, name) {
			return true
		}
	}
	return false
}

func matchOne(pattern, name string) bool {
	if ok, _ := path.Match(pattern, name); ok {
		return true
	}
	if base, found := strings.CutSuffix(name, "_total"); found {
		ok, _ := path.Match(pattern, base)
		return ok
	}
	return false
}
