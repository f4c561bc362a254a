package guard

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// The host exposes only legacy names ([a-zA-Z_:][a-zA-Z0-9_:]* for metrics,
// [a-zA-Z_][a-zA-Z0-9_]* for labels) so every format and every Prometheus
// version reads them without escaping. The charset is prometheus/common's;
// the rules on top of it are the host's.

// ValidMetricName reports whether name is a legacy Prometheus metric name.
func ValidMetricName(name string) bool {
	return model.LegacyValidation.IsValidMetricName(name)
}

// ValidLabelName reports whether name is a legacy label name that is not
// reserved for Prometheus's internal use (starting with "__").
func ValidLabelName(name string) bool {
	return model.LegacyValidation.IsValidLabelName(name) && !strings.HasPrefix(name, model.ReservedLabelPrefix)
}

// checkNames validates a chunk's family and label names: legacy charset, no
// label given twice, and no label a histogram's or summary's own series add
// ("le", "quantile"), which would collide with them.
func checkNames(ch wire.Chunk) error {
	name := ch.Name()
	if !ValidMetricName(name) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	typ := ch.Type()
	for j := range ch.NumLabels() {
		l := ch.LabelName(j)
		if !ValidLabelName(l) {
			return fmt.Errorf("family %s: invalid label name %q", name, l)
		}
		// A linear scan: chunks have a handful of labels, and a set would
		// allocate for every chunk of every scrape.
		for k := range j {
			if ch.LabelName(k) == l {
				return fmt.Errorf("family %s: label %q given twice", name, l)
			}
		}
		if (l == model.BucketLabel && typ == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM) || (l == model.QuantileLabel && typ == pluginv1.MetricType_METRIC_TYPE_SUMMARY) {
			return fmt.Errorf("family %s: label %q is reserved for its type", name, l)
		}
	}
	return nil
}

// reservedPrefix returns the first of prefixes that name starts with: the
// host's own families (plexporter_, go_, process_) are exposed by the host
// alone.
func reservedPrefix(name string, prefixes []string) (string, bool) {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return p, true
		}
	}
	return "", false
}

// checkMetadata checks what a chunk says about its family before any
// sample: names (checkNames, and no longer than MaxNameLen), the label
// count, and help and unit (valid UTF-8 — the string table is bytes, so
// nothing checked them before — and within their lengths). It returns the
// drop reason with the error.
func checkMetadata(ch wire.Chunk) (string, error) {
	name := ch.Name()
	if len(name) > MaxNameLen {
		return ReasonInvalidName, fmt.Errorf("metric name %q... is %d bytes long, more than %d", name[:64], len(name), MaxNameLen)
	}
	for j := range ch.NumLabels() {
		if l := ch.LabelName(j); len(l) > MaxNameLen {
			return ReasonInvalidName, fmt.Errorf("family %s: label name %q... is %d bytes long, more than %d", name, l[:64], len(l), MaxNameLen)
		}
	}
	if err := checkNames(ch); err != nil {
		return ReasonInvalidName, err
	}
	if n := ch.NumLabels(); n > MaxLabels {
		return ReasonLabelLimit, fmt.Errorf("family %s: %d label names, more than %d", name, n, MaxLabels)
	}
	if help := ch.Help(); len(help) > MaxHelpLen || !utf8.ValidString(help) {
		return ReasonMalformed, fmt.Errorf("family %s: help text not valid UTF-8 or longer than %d bytes (%d)", name, MaxHelpLen, len(help))
	}
	if unit := ch.Unit(); len(unit) > MaxNameLen || !utf8.ValidString(unit) {
		return ReasonMalformed, fmt.Errorf("family %s: unit not valid UTF-8 or longer than %d bytes (%d)", name, MaxNameLen, len(unit))
	}
	return "", nil
}

// seriesNames returns the names a family of type t named name takes in
// the text format and in OpenMetrics: its own name, the names of its
// samples, and the _created sample OpenMetrics gives counters, histograms
// and summaries. Parsers assign a sample to a family by these names (the
// text parser reads x_bucket, x_sum and x_count as parts of a histogram
// x), so no two families may share one; the first family to take a name
// keeps it. A counter without the _total suffix also takes name_total,
// the name OpenMetrics gives its samples.
//
// A counter's OpenMetrics family name (x for x_total) is not taken: a gauge
// x next to a counter x_total is what client_golang's own Go collector
// exposes (go_memstats_alloc_bytes and go_memstats_alloc_bytes_total), and
// Prometheus reads it. The host exposes no OpenMetrics info families, so no
// _info names are taken either.
func seriesNames(name string, t pluginv1.MetricType) []string {
	switch t {
	case pluginv1.MetricType_METRIC_TYPE_COUNTER:
		if base, ok := strings.CutSuffix(name, "_total"); ok {
			return []string{name, base + "_created"}
		}
		return []string{name, name + "_total", name + "_created"}
	case pluginv1.MetricType_METRIC_TYPE_HISTOGRAM:
		return []string{name, name + "_bucket", name + "_sum", name + "_count", name + "_created"}
	case pluginv1.MetricType_METRIC_TYPE_SUMMARY:
		return []string{name, name + "_sum", name + "_count", name + "_created"}
	}
	return []string{name}
}

// createdQuantiles explains why a summary named x_created cannot be
// exposed: its quantile series are named x_created, which OpenMetrics
// parsers (Prometheus among them) take for the summary's created timestamp
// and drop. It returns "" for every other family.
func createdQuantiles(name string, t pluginv1.MetricType) string {
	if t == pluginv1.MetricType_METRIC_TYPE_SUMMARY && strings.HasSuffix(name, "_created") {
		return "quantile series named like an OpenMetrics created timestamp (_created)"
	}
	return ""
}

// typeName is the Prometheus name of a metric type, for messages.
func typeName(t pluginv1.MetricType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "METRIC_TYPE_"))
}
