package expose

import (
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/host/internal/merge"
	"github.com/plexporter/plexporter/sdk/dtoconv"
)

// toDTO converts a merged family to client_model, for the protobuf format
// and as the reference in tests.
func toDTO(f *merge.Family) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: proto.String(f.Name), Help: proto.String(f.Help), Type: dtoconv.Type(f.Type).Enum()}
	if f.Unit != "" {
		mf.Unit = proto.String(f.Unit)
	}
	for pi := range f.Parts {
		p := &f.Parts[pi]
		nl, nb := len(p.Chunk.LabelNames), len(p.Chunk.Bounds)
		for k, n := 0, p.Samples(); k < n; k++ {
			mf.Metric = append(mf.Metric, dtoconv.Metric(p.Batch, p.Chunk, p.Index(k), nl, nb))
		}
	}
	return mf
}

// ToDTO converts merged families to client_model families.
func ToDTO(fams []*merge.Family) []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, len(fams))
	for i, f := range fams {
		out[i] = toDTO(f)
	}
	return out
}
