package wire

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

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
// call: client.Collect(ctx, req, wire.MaxMessage).
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
	// MaxErrors bounds the partial errors kept; later ones are discarded
	// and counted (Drained.ErrorsDropped).
	MaxErrors int
	// MaxErrorBytes bounds the bytes of partial errors kept (collector and
	// message, after MaxErrorLen): an error that would cross it is
	// discarded and counted.
	MaxErrorBytes int
	// MaxErrorLen is the longest collector name or message kept; a longer
	// one is cut there and marked (TruncateError).
	MaxErrorLen int
	// StopErrorBytes ends the stream (ErrErrorFlood) once this many bytes
	// of partial errors arrived in one collect, kept or not: past it the
	// plugin is only making the host decode what it will discard.
	StopErrorBytes int
}

// Byte budget per series of the cap, and its floor (see LimitsFor).
const (
	BytesPerSeries = 256
	MinBytes       = 4 << 20
)

// The partial-error budget of one collect (LimitsFor). The SDK reports
// each distinct error once per collect, and a real one is a sentence or a
// path: these sit far above what a plugin sends, and bound what one that
// makes up errors costs the host (a 4 MiB message times 100 grew the host
// by 400 MiB per scrape, and its log by as much).
const (
	MaxErrors      = 100
	MaxErrorBytes  = 64 << 10
	MaxErrorLen    = 1 << 10
	StopErrorBytes = 2 << 20
)

// LimitsFor returns the limits of a plugin whose series cap is maxSeries (0:
// no cap): that cap, and a byte budget of BytesPerSeries per series of it
// (at least MinBytes), which bounds a plugin that stays under its cap with
// huge label values or string tables. Measured (TestLimitsFitRealBatches):
// the benchmark workloads take 14–18 bytes per series decoded, gauges with
// a unique label value each (the chaos plugin) about 50, so a plugin at its
// cap is far from its byte budget (24 MiB at the default cap of 100,000).
// The guard (internal/guard) applies the same limits exactly.
func LimitsFor(maxSeries int) Limits {
	lim := Limits{MaxErrors: MaxErrors, MaxErrorBytes: MaxErrorBytes, MaxErrorLen: MaxErrorLen, StopErrorBytes: StopErrorBytes}
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
	d := DrainCounted(s, lim)
	return d.Batches, d.Errors, d.Err
}

// Drained is what DrainCounted received.
type Drained struct {
	Batches []*pluginv1.Batch
	Errors  []*pluginv1.CollectError
	// ErrorsDropped counts the partial errors discarded by the error
	// budget (MaxErrors, MaxErrorBytes); ErrorsTruncated those kept cut
	// to MaxErrorLen.
	ErrorsDropped, ErrorsTruncated int
	// Err ended the stream (nil at a clean end or at a limit of the batches).
	Err error
}

// ErrErrorFlood ends a stream that sent more than Limits.StopErrorBytes of
// partial errors.
var ErrErrorFlood = errors.New("the plugin sent more partial errors than the host reads in one collect; its stream was stopped")

// DrainCounted is Drain that also says what the error budget discarded.
// Partial errors are budgeted as they arrive: each is cut to MaxErrorLen,
// kept while the count and bytes kept stay within MaxErrors and
// MaxErrorBytes, discarded and counted otherwise; past StopErrorBytes
// received the stream ends with ErrErrorFlood (the caller cancels it).
func DrainCounted(s Stream, lim Limits) (d Drained) {
	series, bytes, errBytes, errSeen := 0, 0, 0, 0
	for {
		msg, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return d
		}
		if err != nil {
			d.Err = err
			return d
		}
		if b := msg.GetBatch(); b != nil {
			d.Batches = append(d.Batches, b)
			series += Series(b)
			bytes += Size(b)
		}
		for _, e := range msg.GetErrors() {
			errSeen += len(e.GetCollector()) + len(e.GetMessage())
			kept, cut := TruncateError(e, lim.MaxErrorLen)
			n := len(kept.GetCollector()) + len(kept.GetMessage())
			if (lim.MaxErrors > 0 && len(d.Errors) >= lim.MaxErrors) || (lim.MaxErrorBytes > 0 && errBytes+n > lim.MaxErrorBytes) {
				d.ErrorsDropped++
				continue
			}
			if cut {
				d.ErrorsTruncated++
			}
			errBytes += n
			d.Errors = append(d.Errors, kept)
		}
		if lim.StopErrorBytes > 0 && errSeen > lim.StopErrorBytes {
			d.Err = ErrErrorFlood
			return d
		}
		if lim.Exceeded(series, bytes) {
			return d
		}
	}
}

// TruncateError returns e with its collector and message cut to at most
// max bytes each (0: no limit), at a rune boundary and marked with how
// long they were, and whether anything was cut. e itself is not changed
// when nothing needs cutting.
func TruncateError(e *pluginv1.CollectError, max int) (*pluginv1.CollectError, bool) {
	if max <= 0 || (len(e.GetCollector()) <= max && len(e.GetMessage()) <= max) {
		return e, false
	}
	return &pluginv1.CollectError{Collector: truncate(e.GetCollector(), max), Message: truncate(e.GetMessage(), max)}, true
}

// truncate cuts s to at most max bytes of valid UTF-8 and says so.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	mark := fmt.Sprintf("… (truncated from %d bytes)", len(s))
	keep := max - len(mark)
	if keep < 0 {
		keep = 0
	}
	return strings.ToValidUTF8(s[:keep], "") + mark
}

// Exceeded reports whether series and bytes are beyond lim.
func (lim Limits) Exceeded(series, bytes int) bool {
	return (lim.MaxSeries > 0 && series > lim.MaxSeries) || (lim.MaxBytes > 0 && bytes > lim.MaxBytes)
}
