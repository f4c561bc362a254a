package launch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/plexporter/plexporter/host/internal/pluginlog"
)

// logLineLimit is the longest log line the host reads as one line
// (go-plugin's default PluginLogBufferSize): a longer one is cut there,
// marked, and the rest of it skipped unread by the parser.
const logLineLimit = 64 * 1024

// LogBudget is what one plugin's stderr may cost the host. Lines and their
// bytes are charged to two token buckets before anything looks inside
// them; a line that finds either empty is dropped, counted in Dropped and
// told in one notice per NoticeInterval. ReadRate bounds the bytes read
// from the pipe per second at all: past it the host stops reading for a
// while and the plugin's writes block (it slows itself, nothing else), so
// the reader's CPU is bounded whatever the plugin writes.
type LogBudget struct {
	Lines, LineBurst float64 // lines per second, and the burst
	Bytes, ByteBurst float64 // line bytes per second, and the burst
	ReadRate         float64 // bytes read from the pipe per second, dropped lines included
	NoticeInterval   time.Duration
	// Dropped counts the lines dropped (shared across the plugin's
	// restarts); nil to count nowhere.
	Dropped *atomic.Uint64
	// OnDrop, when set, is called at every dropped line, after Dropped
	// counts it; it must not block (the reader waits for it).
	OnDrop func()
}

// DefaultLogBudget: far above what a plugin logs on purpose (a Go panic
// with a few hundred goroutines fits the bursts), far below what a flood
// writes. A plugin writing hclog JSON as fast as the pipe took it cost the
// host 92 % of a CPU and 396 MiB of log in 40 s.
var DefaultLogBudget = LogBudget{
	Lines: 100, LineBurst: 2000,
	Bytes: 64 << 10, ByteBurst: 1 << 20,
	ReadRate:       1 << 20,
	NoticeInterval: 10 * time.Second,
}

// bucket is a token bucket: rate tokens a second up to burst.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newBucket(rate, burst float64, now time.Time) *bucket {
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) refill(now time.Time) {
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// throttle reads from r at most rate bytes a second (after a burst of one
// second's worth), sleeping when ahead.
type throttle struct {
	r io.Reader
	b *bucket
}

func (t *throttle) Read(p []byte) (int, error) {
	if t.b.rate <= 0 {
		return t.r.Read(p)
	}
	if len(p) > int(t.b.burst) {
		p = p[:int(t.b.burst)]
	}
	n, err := t.r.Read(p)
	now := time.Now()
	t.b.refill(now)
	t.b.tokens -= float64(n)
	if t.b.tokens < 0 {
		time.Sleep(time.Duration(-t.b.tokens / t.b.rate * float64(time.Second)))
	}
	return n, err
}

// relayLogs reads a plugin's stderr within budget and logs each line the
// budget admits through relay. It returns the reader go-plugin gets as
// the plugin's stderr: it carries nothing and ends when the plugin's
// stderr does, so go-plugin's own parser (which decoded every line, and
// panicked on {"@message":1}) never sees a line, and go-plugin still
// waits for the stream to end before it reaps the process.
//
// Every whole line is also shown to crash (before the budget: a panic after
// a flood still names the crash), which keeps the lines that say why the
// plugin died; crash.done is closed when the stream ends.
func relayLogs(r io.ReadCloser, relay *pluginlog.Relay, budget LogBudget, log *slog.Logger, plugin string, crash *crashNote) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		defer r.Close()
		if crash != nil {
			defer close(crash.done)
		}
		now := time.Now()
		lines := newBucket(budget.Lines, budget.LineBurst, now)
		bytesB := newBucket(budget.Bytes, budget.ByteBurst, now)
		br := bufio.NewReaderSize(&throttle{r: r, b: newBucket(budget.ReadRate, max(budget.ReadRate, logLineLimit), now)}, logLineLimit)
		var pending uint64 // dropped since the last notice
		lastNotice := now
		notice := func(now time.Time, final bool) {
			if pending == 0 || (!final && now.Sub(lastNotice) < budget.NoticeInterval) {
				return
			}
			log.Warn("plugin writes more log than its budget; lines dropped (plexporter_plugin_log_dropped_total)", pluginlog.Key, plugin,
				"dropped", pending, "lines_per_second", budget.Lines, "bytes_per_second", budget.Bytes)
			pending, lastNotice = 0, now
		}
		for {
			line, err := br.ReadSlice('\n')
			cut := errors.Is(err, bufio.ErrBufferFull)
			if len(line) > 0 {
				if !cut {
					crash.see(line)
				}
				now := time.Now()
				lines.refill(now)
				bytesB.refill(now)
				n := float64(len(line))
				if lines.tokens >= 1 && bytesB.tokens >= n {
					lines.tokens--
					bytesB.tokens -= n
					line = bytes.TrimSuffix(line, []byte{'\n'})
					if cut {
						// Cut: logged as plain text with a mark (a cut
						// JSON line would not parse anyway).
						relay.Line(append(append([]byte(nil), line...), "… (line truncated at 64 KiB)"...))
					} else {
						relay.Line(line)
					}
				} else {
					pending++
					if budget.Dropped != nil {
						budget.Dropped.Add(1)
					}
					if budget.OnDrop != nil {
						budget.OnDrop()
					}
				}
				notice(now, false)
			}
			if cut {
				err = skipLine(br)
			}
			if err != nil {
				notice(time.Now(), true)
				return // io.EOF, or os.ErrClosed once cmd.Wait closed the pipe: the plugin is gone
			}
		}
	}()
	return pr
}

// skipLine discards the rest of a line too long to read as one.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, os.ErrClosed) {
				return io.EOF
			}
			return err
		}
	}
}
