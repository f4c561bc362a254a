package wire

import (
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Recorder keeps what an in-process Encoder (or sdk.Writer) sends, for
// code that builds batches without a gRPC stream (the host's self-metrics,
// tests, benchmarks):
//
//	var rec wire.Recorder
//	enc := wire.NewEncoder(0, false, rec.Send) // or sdktest.NewWriter(filter, "", rec.Send)
//	... write samples ...
//	err := enc.Flush()
//	use(rec.Batches)
//
// It takes the send function rather than a writer so this package stays
// below the SDK: the format does not depend on its producer.
// internal/testkit/batchtest.Record wraps it for a one-line test fixture.
type Recorder struct {
	Batches []*pluginv1.Batch
	Errors  []*pluginv1.CollectError
}

// Send records one response; it is the send function for such a Writer
// and never fails. The batches it keeps must not be reused by the sender,
// which those writers do not do (only Serve's recycles its batches).
func (r *Recorder) Send(resp *pluginv1.CollectResponse) error {
	if b := resp.GetBatch(); b != nil {
		r.Batches = append(r.Batches, b)
	}
	r.Errors = append(r.Errors, resp.GetErrors()...)
	return nil
}
