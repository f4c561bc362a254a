package wire

import "unsafe"

// The string table of a batch is declared bytes, not string (see the
// proto), so that decoding never fails on an invalid UTF-8 entry: the host
// validates entries itself and drops only the series using a bad one. Code
// on both sides still deals in strings, so these two conversions share the
// memory instead of copying it, and that is sound only because a string
// table's bytes are never written after the entry is made:
//
//   - on the host, an entry is a slice gRPC's decoder allocated for it;
//     nothing writes into a received batch, so a string made from an entry
//     stays valid (and keeps the entry alive) for as long as it is held,
//     even after the batch itself is dropped;
//   - in the SDK, an entry made with TableEntry aliases the plugin's own
//     string, which Go never lets change; the marshaller only reads it.
//
// Nobody may write into an entry in place: it may be a Go string's memory,
// which is immutable (and may be read-only).

// TableString returns the string table entry b as a string without
// copying it.
func TableString(b []byte) string {
	// A slice header starts with a string header's two words (data, len);
	// unsafe.String would do the same plus checks that cost 1–2% of a
	// merge, on a path that resolves every label value of every sample.
	return *(*string)(unsafe.Pointer(&b))
}

// TableEntry returns s as a string table entry without copying it. The
// entry must never be written into.
func TableEntry(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
