// Package wire is the module's one home for the columnar batch wire format
// of proto/plexporter/plugin/v1 (Batch, FamilyChunk), both ways: encoding
// samples into batches (Encoder, under the SDK's Writer and the host's own
// families), validating a chunk's shape, reading it through a view instead
// of indexing its packed columns, draining a Collect stream, and recording
// what an encoder produces.
//
// Everything else in the module (the SDK, the host's merge and encoders,
// sdktest, the benchmarks) writes and reads batches through this package,
// so the layout of the packed columns is known in exactly one place. It
// imports nothing of the module but the protocol.
package wire
