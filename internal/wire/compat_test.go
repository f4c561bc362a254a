package wire_test

import (
	"bytes"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
	"github.com/plexporter/plexporter/internal/testkit/batchtest"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
)

// oldBatch is the Batch message as the first release declared it, with
// `repeated string strings = 1`: what plugins built before the string table
// became bytes send, and what hosts of that release decode.
func oldBatch(t *testing.T) protoreflect.MessageType {
	t.Helper()
	fd := protodesc.ToFileDescriptorProto(pluginv1.File_plexporter_plugin_v1_plugin_proto)
	found := false
	for _, m := range fd.MessageType {
		if m.GetName() != "Batch" {
			continue
		}
		for _, f := range m.Field {
			if f.GetName() == "strings" {
				if f.GetType() != descriptorpb.FieldDescriptorProto_TYPE_BYTES {
					t.Fatalf("Batch.strings is %v, this test expects bytes", f.GetType())
				}
				f.Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
				found = true
			}
		}
	}
	if !found {
		t.Fatal("no Batch.strings in the protocol")
	}
	file, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return dynamicpb.NewMessageType(file.Messages().ByName("Batch"))
}

func TestStringTableIsWireCompatible(t *testing.T) {
	old := oldBatch(t)
	h := sdk.NewDesc("c_seconds", sdk.Histogram, "Hist ø.", "op")
	for _, b := range append(batchtest.Mix("c_", 20000), batchtest.Record(func(w *sdk.Writer) {
		w.Gauge(gaugeDesc, 1, "ünïcödé", "")
		w.Histogram(h, []float64{1, 2}, []uint64{1, 2}, 3, 4, "read")
	})...) {
		now, err := proto.MarshalOptions{Deterministic: true}.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		// A host of the first release decodes what this SDK sends...
		m := old.New().Interface()
		if err := proto.Unmarshal(now, m); err != nil {
			t.Fatalf("the old declaration does not decode the new encoding: %v", err)
		}
		// ...and a plugin of the first release sends exactly these bytes,
		// which this host decodes into the same batch.
		then, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(then, now) {
			t.Fatal("string and bytes declarations encode the batch differently")
		}
		var got pluginv1.Batch
		if err := proto.Unmarshal(then, &got); err != nil {
			t.Fatalf("the new declaration does not decode the old encoding: %v", err)
		}
		if !proto.Equal(&got, b) {
			t.Fatal("old encoding decoded into another batch")
		}
	}
}

// The reason for bytes: one invalid entry failed the whole message (and, in
// the Go SDK, its marshalling); now it decodes and the guard sees it.
func TestInvalidUTF8EntryDecodes(t *testing.T) {
	b := &pluginv1.Batch{
		Strings:  [][]byte{nil, []byte("x_up"), []byte("dev"), []byte("bad\xff"), []byte("good")},
		Families: []*pluginv1.FamilyChunk{{Name: 1, Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, LabelNames: []uint32{2}, LabelValues: []uint32{3, 4}, Values: []float64{1, 2}}},
	}
	raw, err := proto.Marshal(b)
	if err != nil {
		t.Fatalf("marshal with an invalid entry: %v", err)
	}
	if err := proto.Unmarshal(raw, oldBatch(t).New().Interface()); err == nil {
		t.Fatal("the string declaration decoded invalid UTF-8; this test no longer shows why the table is bytes")
	}
	var got pluginv1.Batch
	if err := proto.Unmarshal(raw, &got); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	ch, err := wire.Open(&got, got.Families[0])
	if err != nil {
		t.Fatal(err)
	}
	if ch.LabelValue(0, 0) != "bad\xff" || ch.LabelValue(1, 0) != "good" {
		t.Fatalf("label values %q %q", ch.LabelValue(0, 0), ch.LabelValue(1, 0))
	}
}

// The byte budget of LimitsFor must be far above what real batches take, or
// a plugin at its series cap would be cut by the budget instead.
func TestLimitsFitRealBatches(t *testing.T) {
	unique := sdk.NewDesc("u_value", sdk.Gauge, "One unique label value per series.", "plugin", "i")
	for name, bs := range map[string][]*pluginv1.Batch{
		"node mix":           batchtest.Mix("x_", 100000),
		"benchmark workload": batchtest.Record(workload.NewPlan(100000, 0, 1).Write),
		"unique label values": batchtest.Record(func(w *sdk.Writer) {
			for i := range 100000 {
				w.Gauge(unique, float64(i), "chaos", "series-"+strconv.Itoa(i))
			}
		}),
	} {
		series, size := 0, 0
		for _, b := range bs {
			series, size = series+wire.Series(b), size+wire.Size(b)
		}
		perSeries := float64(size) / float64(series)
		t.Logf("%s: %d series, %.1f bytes per series decoded", name, series, perSeries)
		if perSeries*3 > wire.BytesPerSeries {
			t.Errorf("%s: %.1f bytes per series, less than 3x below the budget of %d", name, perSeries, wire.BytesPerSeries)
		}
	}
}
