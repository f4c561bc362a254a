package sdktest

import (
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/internal/testhook"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

// NewWriter returns a Writer that hands each full batch (and the errors
// recorded so far) to send, for a benchmark that calls a plugin's Collect
// in process, without the gRPC path Run and Collect take; call its Flush at
// the end. The batches are not guarded: check the plugin's output with Run.
func NewWriter(filter *metricfilter.Filter, prefix string, send func(*pluginv1.CollectResponse) error) *sdk.Writer {
	return testhook.NewWriter(filter, prefix, send).(*sdk.Writer)
}
