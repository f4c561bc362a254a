// Package syncbuf is a bytes.Buffer safe for concurrent writers: the sink
// for the output of processes that tests run (a host, its plugins, a
// Prometheus), written by exec's copying goroutines while the test reads.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects writes from any goroutine; String returns all of them.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
