package conformance

import (
	"path"
	"regexp"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// batchBuilder writes one sample per catalogue entry, so that the guard
// can judge the entries as it judges what a plugin sends.
type batchBuilder struct {
	b     *pluginv1.Batch
	index map[string]uint32
}

func newBatchBuilder() *batchBuilder {
	return &batchBuilder{b: &pluginv1.Batch{Strings: [][]byte{{}}}, index: map[string]uint32{"": 0}}
}

func (bb *batchBuilder) str(s string) uint32 {
	if i, ok := bb.index[s]; ok {
		return i
	}
	i := uint32(len(bb.b.Strings))
	bb.b.Strings = append(bb.b.Strings, wire.TableEntry(s))
	bb.index[s] = i
	return i
}

// globPart is a wildcard or a character class of a catalogue glob.
var globPart = regexp.MustCompile(`\*|\?|\[[^\]]*\]`)

// sample adds one sample of d, every label value empty, a histogram or a
// summary with no buckets or quantiles.
func (bb *batchBuilder) sample(d *pluginv1.MetricDescriptor) {
	ch := &pluginv1.FamilyChunk{
		Name:   bb.str(globPart.ReplaceAllString(d.GetName(), "x")),
		Type:   d.GetType(),
		Help:   bb.str(d.GetHelp()),
		Unit:   bb.str(d.GetUnit()),
		Values: []float64{0},
	}
	for _, l := range d.GetLabelNames() {
		ch.LabelNames = append(ch.LabelNames, bb.str(l))
		ch.LabelValues = append(ch.LabelValues, 0)
	}
	if t := d.GetType(); t == pluginv1.MetricType_METRIC_TYPE_HISTOGRAM || t == pluginv1.MetricType_METRIC_TYPE_SUMMARY {
		ch.Counts = []uint64{0}
	}
	bb.b.Families = append(bb.b.Families, ch)
}

// pathMatch is the glob the host matches catalogue patterns with.
func pathMatch(pattern, name string) (bool, error) { return path.Match(pattern, name) }
