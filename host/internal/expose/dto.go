package expose

import (
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/plexporter/plexporter/internal/guard"
	"github.com/plexporter/plexporter/internal/wire"
)

// toDTO converts a merged family to client_model, for the protobuf format
// and as the reference in tests.
func toDTO(f *guard.Family) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: proto.String(f.Name), Help: proto.String(f.Help), Type: wire.DTOType(f.Type).Enum()}
	if f.Unit != "" {
		mf.Unit = proto.String(f.Unit)
	}
	for pi := range f.Parts {
		p := &f.Parts[pi]
		for k, n := 0, p.Samples(); k < n; k++ {
			mf.Metric = append(mf.Metric, p.Chunk.Metric(p.Index(k)))
		}
	}
	return mf
}
