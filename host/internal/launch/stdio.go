package launch

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// go-plugin opens two streams of its own on every plugin connection, and
// reads each in a loop as fast as the plugin sends: GRPCStdio, which
// carries what a Go plugin writes to os.Stdout and os.Stderr after Serve
// (go-plugin points both at pipes of its own; the host throws it away,
// SyncStdout/SyncStderr), and GRPCBroker, which plexporter never uses. A
// plugin flooding either cost the host the decoding of every message. The
// host's own streams (Collect) have their byte budget in scrape.
const goPluginServicePrefix = "/plugin."

// StdioBudget bounds, in message bytes a second after a burst, what one
// plugin's go-plugin service streams may cost the host. Past it the host
// stops reading the stream for a while: HTTP/2 flow control then blocks the
// plugin's sender and, behind it, the plugin's own writes to os.Stdout or
// os.Stderr. The plugin slows itself; the host and the other streams on
// the connection (flow control is per stream) do not notice.
type StdioBudget struct {
	Rate, Burst float64
}

// DefaultStdioBudget: a library's occasional printf, or a Go panic's
// stack through os.Stderr, never meets it; a flood is held to it. At 1 KiB
// a message (go-plugin's chunk) it is 256 messages a second.
var DefaultStdioBudget = StdioBudget{Rate: 256 << 10, Burst: 1 << 20}

// budgetGoPluginStreams returns the interceptor that charges every message
// go-plugin receives on its own streams to one bucket per plugin
// connection.
func budgetGoPluginStreams(b StdioBudget) grpc.StreamClientInterceptor {
	if b.Rate <= 0 {
		return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(ctx, desc, cc, method, opts...)
		}
	}
	shared := &pacer{b: newBucket(b.Rate, b.Burst, time.Now())}
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasPrefix(method, goPluginServicePrefix) {
			return s, err
		}
		return &pacedStream{ClientStream: s, pace: shared}, nil
	}
}

// pacer is a bucket shared by the streams of one connection.
type pacer struct {
	mu sync.Mutex
	b  *bucket
}

// charge takes n bytes and says how long the reader must wait before it
// reads again.
func (p *pacer) charge(n int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.refill(time.Now())
	p.b.tokens -= float64(n)
	if p.b.tokens >= 0 {
		return 0
	}
	return time.Duration(-p.b.tokens / p.b.rate * float64(time.Second))
}

type pacedStream struct {
	grpc.ClientStream
	pace *pacer
}

func (s *pacedStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	n := 1 << 10 // a message that is not protobuf: go-plugin's chunk size
	if pm, ok := m.(proto.Message); ok {
		n = max(proto.Size(pm), 1)
	}
	if wait := s.pace.charge(n); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.Context().Done(): // the plugin stopped: go-plugin's next Recv ends the loop
		}
	}
	return nil
}
