package batch

import (
	"errors"
	"io"
	"math"

	"google.golang.org/grpc"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Stream is the receiving side of a Collect call
// (pluginv1.PluginService_CollectClient satisfies it).
type Stream interface {
	Recv() (*pluginv1.CollectResponse, error)
}

// MaxMessageBytes is the largest Collect message the host receives (gRPC's
// own default; go-plugin raises it to 2 GiB, which would let one message
// cost the host that much before anything could count it). A larger message
// ends the stream with RESOURCE_EXHAUSTED; what arrived before it is kept.
// The SDK sends batches of at most about sdk.DefaultBatchBytes (1 MiB).
const MaxMessageBytes = 4 << 20

// MaxMessage is the call option that applies MaxMessageBytes to a Collect
// call: client.Collect(ctx, req, batch.MaxMessage).
var MaxMessage grpc.CallOption = grpc.MaxCallRecvMsgSize(MaxMessageBytes)

// Limits bound what Drain keeps of one stream, so that a plugin that floods
// costs its own series and not the host's memory. A zero field means no
// limit.
type Limits struct {
	// MaxSeries is the plugin's series cap (--plugin.max-series), counted as
	// Prometheus counts series (Series).
	MaxSeries int
	// MaxBytes bounds the decoded size of the batches kept (Size).
	MaxBytes int
	// MaxErrors bounds the partial errors kept; later ones are discarded.
	MaxErrors int
}

// Byte budget per series of the cap, and its floor (see LimitsFor).
const (
	BytesPerSeries = 256
	MinBytes       = 4 << 20
)

// maxErrors is how many partial errors a stream may report. The SDK
// reports each distinct error once per collect, so only a plugin that
// makes up errors reaches it.
const maxErrors = 1000

// LimitsFor returns the limits of a plugin whose series cap is maxSeries (0:
// no cap): that cap, and a byte budget of BytesPerSeries per series of it
// (at least MinBytes), which bounds a plugin that stays under its cap with
// huge label values or string tables. Measured (TestLimitsFitRealBatches):
// the benchmark workloads take 14–18 bytes per series decoded, gauges with
// a unique label value each (the chaos plugin) about 50, so a plugin at its
// cap is far from its byte budget (24 MiB at the default cap of 100,000).
// The guard (internal/merge) applies the same limits exactly.
func LimitsFor(maxSeries int) Limits {
	lim := Limits{MaxErrors: maxErrors}
	if maxSeries > 0 {
		lim.MaxSeries = maxSeries
		lim.MaxBytes = max(min(maxSeries, math.MaxInt/BytesPerSeries)*BytesPerSeries, MinBytes)
	}
	return lim
}

// Drain receives s until it ends or goes past lim. It returns the batches
// and partial errors kept, in order, and the error that ended the stream
// (nil at a clean io.EOF). What arrived before a failure is kept: the
// protocol says batches already received are still used.
//
// Drain counts series and bytes as batches arrive and stops receiving as
// soon as the batches kept exceed lim.MaxSeries or lim.MaxBytes; it then
// returns a nil error. It keeps the batch that crossed the limit (it is
// bounded by MaxMessageBytes), so that the guard, which applies the same
// limits sample by sample, exposes exactly the cap and counts the rest as
// series_limit drops. The caller must then cancel the call's context: that
// ends the RPC and tells the plugin to stop writing.
func Drain(s Stream, lim Limits) (batches []*pluginv1.Batch, errs []*pluginv1.CollectError, err error) {
	series, bytes := 0, 0
	for {
		msg, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return batches, errs, nil
		}
		if err != nil {
			return batches, errs, err
		}
		if b := msg.GetBatch(); b != nil {
			batches = append(batches, b)
			series += Series(b)
			bytes += Size(b)
		}
		for _, e := range msg.GetErrors() {
			if lim.MaxErrors > 0 && len(errs) >= lim.MaxErrors {
				break
			}
			errs = append(errs, e)
		}
		if lim.Exceeded(series, bytes) {
			return batches, errs, nil
		}
	}
}

// Exceeded reports whether series and bytes are beyond lim.
func (lim Limits) Exceeded(series, bytes int) bool {
	return (lim.MaxSeries > 0 && series > lim.MaxSeries) || (lim.MaxBytes > 0 && bytes > lim.MaxBytes)
}
