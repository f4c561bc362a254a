package batch

import (
	"errors"
	"io"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// Stream is the receiving side of a Collect call
// (pluginv1.PluginService_CollectClient satisfies it).
type Stream interface {
	Recv() (*pluginv1.CollectResponse, error)
}

// Drain receives s to its end. It returns every batch and partial error that
// arrived, in order, and the error that ended the stream (nil at a clean
// io.EOF). What arrived before a failure is kept: the protocol says batches
// already received are still used.
func Drain(s Stream) (batches []*pluginv1.Batch, errs []*pluginv1.CollectError, err error) {
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
		}
		errs = append(errs, msg.GetErrors()...)
	}
}
