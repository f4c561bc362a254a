package sdk

import (
	"context"
	"testing"
)

type closing struct {
	nop
	closed int
}

func (c *closing) Close() error { c.closed++; return nil }

type bareClosing struct {
	nop
	closed int
}

func (c *bareClosing) Close() { c.closed++ }

type nop struct{}

func (nop) Info() Info                              { return Info{Name: "nop"} }
func (nop) Configure(context.Context, Config) error { return nil }
func (nop) Collect(context.Context, *Writer) error  { return nil }

// Serve's stop calls a Closer's Close once, and the result-less Close of
// plugins written for earlier SDKs too.
func TestClosePluginCallsClose(t *testing.T) {
	c, b := &closing{}, &bareClosing{}
	closePlugin(c)
	closePlugin(b)
	closePlugin(nop{}) // no Close: nothing to do
	if c.closed != 1 || b.closed != 1 {
		t.Fatalf("Close() error called %d times, Close() %d times; want 1 each", c.closed, b.closed)
	}
	var _ Closer = c
}
