package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

func TestReset(t *testing.T) {
	c := &pluginv1.FamilyChunk{
		Name: 1, Type: histogram, Help: 2, Unit: 3,
		LabelNames: []uint32{4}, LabelValues: []uint32{5, 6}, Values: []float64{1, 2}, Counts: []uint64{1, 2},
		Bounds: []float64{1}, BucketCounts: []uint64{1, 1}, QuantileValues: []float64{0.5},
	}
	labelValues := c.LabelValues
	Reset(c)
	if !proto.Equal(c, &pluginv1.FamilyChunk{}) {
		t.Fatalf("reset chunk is not empty: %v", c)
	}
	if cap(c.LabelValues) != 2 || cap(c.BucketCounts) != 2 || cap(c.QuantileValues) != 1 {
		t.Fatal("reset dropped the columns' memory")
	}
	c.LabelValues = append(c.LabelValues, 9)
	if &labelValues[0] != &c.LabelValues[0] {
		t.Fatal("append after Reset reallocated")
	}
}
