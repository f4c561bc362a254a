package merge

import (
	"fmt"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// ValidMetricName reports whether name is a legacy Prometheus metric name
// ([a-zA-Z_:][a-zA-Z0-9_:]*). The host exposes only such names so every
// format and every Prometheus version can read them without escaping.
func ValidMetricName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ValidLabelName reports whether name is a legacy label name that is not
// reserved ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__").
func ValidLabelName(name string) bool {
	if name == "" || len(name) >= 2 && name[0] == '_' && name[1] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// suffixes that a histogram's or summary's series add to the family name;
// another family with such a name would collide with them.
func checkNames(b *pluginv1.Batch, c *pluginv1.FamilyChunk) error {
	name := b.Strings[c.Name]
	if !ValidMetricName(name) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	seen := make(map[string]bool, len(c.LabelNames))
	for _, idx := range c.LabelNames {
		l := b.Strings[idx]
		if !ValidLabelName(l) {
			return fmt.Errorf("family %s: invalid label name %q", name, l)
		}
		if seen[l] {
			return fmt.Errorf("family %s: label %q given twice", name, l)
		}
		seen[l] = true
		if (l == "le" && c.Type == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM) || (l == "quantile" && c.Type == pluginv1.MetricType_METRIC_TYPE_SUMMARY) {
			return fmt.Errorf("family %s: label %q is reserved for its type", name, l)
		}
	}
	return nil
}
