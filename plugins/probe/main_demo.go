//go:build demo

// The demo build of plexporter-probe (make demo): the plugin unchanged,
// except for the network. The demo node has no NFS server, object store or
// host to ping, and its sandbox no network grant, so each probe answers
// from the table below instead, for the targets the demo's config file
// names (internal/dev/demo/demotree: an ICMP target and two object-store
// URLs; the demo node has no mountinfo, so no NFS probe).
package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// demoAnswers are the round trips of the demo's targets; a target not in
// it fails, as an unreachable one would.
var demoAnswers = map[string]time.Duration{
	"10.0.5.20":                  400 * time.Microsecond,
	"https://object.example/":    34 * time.Millisecond,
	"https://object.example/bkt": 36 * time.Millisecond,
}

func main() {
	p := newPlugin()
	p.run = probeFuncs{
		icmp:  func(ctx context.Context, host string) error { return demoAnswer(ctx, host) },
		nfs:   func(ctx context.Context, addr string, _ uint32) error { return demoAnswer(ctx, addr) },
		https: func(ctx context.Context, _ *http.Client, url string) error { return demoAnswer(ctx, url) },
	}
	sdk.Serve(p)
}

// demoAnswer waits the target's round trip, or fails for a target the
// demo does not have.
func demoAnswer(ctx context.Context, target string) error {
	d, ok := demoAnswers[target]
	if !ok {
		return fmt.Errorf("%s: no such target in the demo", target)
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
