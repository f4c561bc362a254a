// Package batch is the module's one home for the columnar batch wire format
// of proto/plexporter/plugin/v1 (Batch, FamilyChunk): validating a chunk's
// shape, reading it through a view instead of indexing its packed columns,
// draining a Collect stream, and recording what an sdk.Writer produces.
//
// Everything else in the module (the host's merge and encoders, sdktest,
// the benchmarks) reads batches through this package, so the layout of the
// packed columns is known in exactly one place.
package wire
