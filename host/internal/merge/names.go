package merge

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/plexporter/plexporter/internal/batch"
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
func checkNames(ch batch.Chunk) error {
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
