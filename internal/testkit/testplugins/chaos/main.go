// Command chaos is a test-only plugin (never shipped) that misbehaves on
// request, to prove the host survives it. Its behaviour comes from its
// config section in the host's config file; the plugin's name is taken from
// its file name, so one binary can be installed under several names.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

type config struct {
	Family        string   `json:"family"`          // family of the normal series (default chaos_value)
	Series        int      `json:"series"`          // normal gauge series
	Histograms    int      `json:"histograms"`      // 10-bucket histogram series
	Duplicates    int      `json:"duplicates"`      // series repeated
	InvalidNames  bool     `json:"invalid_names"`   // a family with an invalid name and one with a bad label name
	TypeConflict  bool     `json:"type_conflict"`   // emit shared_family as a counter (others emit a gauge)
	SharedFamily  bool     `json:"shared_family"`   // emit shared_family as a gauge
	HugeLabels    bool     `json:"huge_labels"`     // a 1 MiB label value
	Sleep         string   `json:"sleep"`           // sleep this long in Collect (honouring the deadline)
	IgnoreCtx     bool     `json:"ignore_deadline"` // sleep without looking at the deadline
	SleepWhile    string   `json:"sleep_while"`     // with sleep: end the sleep once this file is gone (a test's release, not a clock)
	Panic         bool     `json:"panic"`           // panic in Collect
	ExitMidStream bool     `json:"exit_mid_stream"` // exit the process after the first batch
	SpawnChild    bool     `json:"spawn_child"`     // start a child that ignores SIGTERM
	PIDFile       string   `json:"pid_file"`        // write "pid childpid" here at Configure
	DaemonPIDFile string   `json:"daemon_pid_file"` // start a daemon (setsid, double fork) that writes its pid here
	CloseFile     string   `json:"close_file"`      // write "closed" here when the SDK calls Close
	StderrLine    string   `json:"stderr_line"`     // write this line to stderr at Configure (a hostile log line)
	Warnings      []string `json:"warnings"`        // remarks for the host, through sdk.Config.Warn
	LogAs         string   `json:"log_as"`          // log a line at Configure that claims plugin=<this>
	ExitAfter     string   `json:"exit_after"`      // exit (status 3) this long after Configure: a crash loop
	ExitWhile     string   `json:"exit_while"`      // with exit_after: only while this file exists
	Flood         bool     `json:"flood"`           // after the rest, write gauges without end until the host stops the stream
	InvalidUTF8   bool     `json:"invalid_utf8"`    // first of all, a series whose label value is not valid UTF-8
	StdoutBytes   int      `json:"stdout_bytes"`    // write a line this long to stdout in every Collect (a library's printf)
	StdioFlood    string   `json:"stdio_flood"`     // from Configure on, write without end to "stream" (os.Stdout: go-plugin's stdio stream to the host) or "fd" (fd 1, as C's printf); chaos_stdio_written_bytes says how much got through
	Crash         string   `json:"crash"`           // crash the process in Collect: "panic" (unrecovered, in a goroutine), "segv" (nil dereference) or "abort" (SIGABRT)
	WarningBytes  int      `json:"warning_bytes"`   // one configuration warning this long (an oversized Configure answer)
	WarningCount  int      `json:"warning_count"`   // this many distinct configuration warnings
	Errors        int      `json:"errors"`          // distinct partial errors per collect, each in a message of its own
	ErrorBytes    int      `json:"error_bytes"`     // with errors: the length of each message (default 64)
	LogFlood      string   `json:"log_flood"`       // "json" or "plain": from Configure on, write log lines to fd 2 as fast as the pipe takes them
	LabelAs       string   `json:"label_as"`        // the plugin label value of the normal series (default: the plugin's name), to forge another plugin's series
}

// hintsEnv holds sandbox hints (JSON of sdk.SandboxHints) for Info, which
// must not depend on the config; a manifest's env list lets it through.
const hintsEnv = "CHAOS_SANDBOX_HINTS"

// Every chaos plugin declares chaos_owned_<its name> in its catalogue
// (gauge, labels plugin and i, the help of the normal series): with
// family: chaos_owned_<name> its normal series are in a family it owns.
const ownedPrefix = "chaos_owned_"

// catalogueEnv, a number: Info lists that many more families (an oversized
// Info answer).
const catalogueEnv = "CHAOS_CATALOGUE"

type chaos struct {
	name     string
	collects int
	cfg      config
	desc     *sdk.Desc
	hist     *sdk.Desc
}

var (
	shared       = sdk.NewDesc("chaos_shared", sdk.Gauge, "Shared by several plugins.", "plugin").WithShared()
	sharedWrong  = sdk.NewDesc("chaos_shared", sdk.Counter, "Shared by several plugins.", "plugin")
	badName      = sdk.NewDesc("chaos-bad-name", sdk.Gauge, "Invalid name.")
	badLabel     = sdk.NewDesc("chaos_bad_label", sdk.Gauge, "Invalid label name.", "bad-label")
	huge         = sdk.NewDesc("chaos_huge_label", sdk.Gauge, "A huge label value.", "v")
	hugeValue    = strings.Repeat("x", 1<<20)
	flood        = sdk.NewDesc("chaos_flood", sdk.Gauge, "Series of a plugin that never stops.", "plugin", "i")
	collects     = sdk.NewDesc("chaos_collects_total", sdk.Counter, "Collect calls this process served.", "plugin")
	stdioWritten = sdk.NewDesc("chaos_stdio_written_bytes", sdk.Gauge, "Bytes the stdio flood has written to os.Stdout so far.", "plugin")
	stdioBytes   atomic.Int64
	histBounds   = []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1}
	histCumulate = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
)

func (c *chaos) Info() sdk.Info {
	info := sdk.Info{Name: c.name, Version: "0.0.1-test", Metrics: []*sdk.Desc{shared, sdk.NewDesc(ownedPrefix+c.name, sdk.Gauge, "Test series.", "plugin", "i")}}
	if h := os.Getenv(hintsEnv); h != "" {
		if err := json.Unmarshal([]byte(h), &info.Sandbox); err != nil {
			sdk.Logger().Error("bad "+hintsEnv, "err", err)
		}
	}
	n, _ := strconv.Atoi(os.Getenv(catalogueEnv))
	for i := range n {
		info.Metrics = append(info.Metrics, sdk.NewDesc(fmt.Sprintf("chaos_catalogue_%d", i), sdk.Gauge, "One of many families.", "plugin"))
	}
	return info
}

func (c *chaos) Configure(_ context.Context, cfg sdk.Config) error {
	if err := cfg.Decode(&c.cfg); err != nil {
		return err
	}
	for _, w := range c.cfg.Warnings {
		cfg.Warn("%s", w)
	}
	for i := range c.cfg.WarningCount {
		cfg.Warn("warning %d of a plugin that warns without end", i)
	}
	if c.cfg.WarningBytes > 0 {
		cfg.Warn("%s", strings.Repeat("w", c.cfg.WarningBytes))
	}
	if c.cfg.LogAs != "" {
		sdk.Logger().Info("chaos: posing as another plugin", "plugin", c.cfg.LogAs)
	}
	fam := c.cfg.Family
	if fam == "" {
		fam = "chaos_value"
	}
	c.desc = sdk.NewDesc(fam, sdk.Gauge, "Test series.", "plugin", "i")
	c.hist = sdk.NewDesc(fam+"_seconds", sdk.Histogram, "Test histogram.", "plugin", "i")
	child := 0
	if c.cfg.SpawnChild {
		// A shell that ignores SIGTERM and sleeps forever: only a group kill ends it.
		cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done")
		if err := cmd.Start(); err != nil {
			return err
		}
		child = cmd.Process.Pid
	}
	if c.cfg.ExitAfter != "" {
		d, err := time.ParseDuration(c.cfg.ExitAfter)
		if err != nil {
			return err
		}
		time.AfterFunc(d, func() {
			if c.cfg.ExitWhile != "" {
				if _, err := os.Stat(c.cfg.ExitWhile); err != nil {
					return
				}
			}
			os.Exit(3)
		})
	}
	if c.cfg.DaemonPIDFile != "" {
		// The shell starts a setsid'd shell in the background and exits: the
		// daemon is re-parented and leads its own session and process group,
		// out of reach of the group kill, the lifeline and the parent-death
		// signal.
		script := fmt.Sprintf(`setsid /bin/sh -c 'trap "" TERM HUP INT; echo $$ > %s; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &`, c.cfg.DaemonPIDFile)
		if err := exec.Command("/bin/sh", "-c", script).Run(); err != nil {
			return err
		}
	}
	if c.cfg.StderrLine != "" {
		// fd 2 itself, the log stream the host parses: go-plugin points
		// os.Stderr at its stdio relay.
		syscall.Write(2, []byte(c.cfg.StderrLine+"\n"))
	}
	if c.cfg.LogFlood != "" {
		line := []byte(`{"@level":"error","@message":"chaos: flooding the log","@timestamp":"2001-01-01T00:00:00.000000Z","path":"/forged","k":"` + strings.Repeat("v", 200) + `"}` + "\n")
		if c.cfg.LogFlood == "plain" {
			line = []byte("chaos: flooding the log in plain text " + strings.Repeat("v", 200) + "\n")
		}
		go func() {
			for {
				if _, err := syscall.Write(2, line); err != nil && err != syscall.EINTR {
					return
				}
			}
		}()
	}
	if c.cfg.StdioFlood != "" {
		// os.Stdout is not fd 1: go-plugin's Serve points it at a pipe whose
		// every chunk it sends the host on its GRPCStdio stream. fd 1 is
		// the pipe the host reads the handshake from.
		write := os.Stdout.Write
		if c.cfg.StdioFlood == "fd" {
			write = func(b []byte) (int, error) { return syscall.Write(1, b) }
		}
		chunk := bytes.Repeat([]byte{'s'}, 1<<10)
		go func() {
			for {
				n, err := write(chunk)
				stdioBytes.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	if c.cfg.PIDFile != "" {
		if err := os.WriteFile(c.cfg.PIDFile, []byte(fmt.Sprintf("%d %d\n", os.Getpid(), child)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (c *chaos) Collect(ctx context.Context, w *sdk.Writer) error {
	c.collects++
	w.Counter(collects, float64(c.collects), c.name)
	if c.cfg.StdioFlood != "" {
		w.Gauge(stdioWritten, float64(stdioBytes.Load()), c.name)
	}
	if c.cfg.Sleep != "" {
		d, err := time.ParseDuration(c.cfg.Sleep)
		if err != nil {
			return err
		}
		var released <-chan struct{}
		if c.cfg.SleepWhile != "" {
			stop := make(chan struct{})
			defer close(stop)
			released = gone(c.cfg.SleepWhile, stop)
		}
		done := ctx.Done()
		if c.cfg.IgnoreCtx {
			done = nil
		}
		select {
		case <-time.After(d):
		case <-released:
		case <-done:
			return ctx.Err()
		}
	}
	if c.cfg.Panic {
		panic("chaos: asked to panic")
	}
	if c.cfg.StdoutBytes > 0 {
		// To fd 1 itself, as a C library's printf does: go-plugin's Serve
		// points os.Stdout at a pipe of its own.
		line := append(bytes.Repeat([]byte{'x'}, c.cfg.StdoutBytes), '\n')
		for len(line) > 0 {
			n, err := syscall.Write(1, line)
			if err != nil {
				return err
			}
			line = line[n:]
		}
	}
	switch c.cfg.Crash {
	case "panic":
		done := make(chan struct{})
		go func() { defer close(done); panic("chaos: crash asked for") }()
		<-done
	case "segv":
		var p *chaos
		done := make(chan struct{})
		go func() { defer close(done); _ = p.collects }()
		<-done
	case "abort":
		syscall.Kill(os.Getpid(), syscall.SIGABRT)
		time.Sleep(time.Minute)
	}
	if c.cfg.InvalidUTF8 {
		// Before the good series, so a stream lost to it would lose them too.
		w.Gauge(c.desc, 1, c.name, "bad\xffvalue")
	}
	label := c.name
	if c.cfg.LabelAs != "" {
		label = c.cfg.LabelAs
	}
	for i := range c.cfg.Series {
		w.Gauge(c.desc, float64(i), label, fmt.Sprint(i))
		if c.cfg.ExitMidStream && i == sdk.DefaultBatchSamples+1 {
			os.Exit(3) // the first batch has been sent
		}
	}
	for i := range c.cfg.Histograms {
		w.Histogram(c.hist, histBounds, histCumulate, 11, 0.5, c.name, fmt.Sprint(i))
	}
	for i := range c.cfg.Duplicates {
		w.Gauge(c.desc, -1, c.name, fmt.Sprint(i%max(c.cfg.Series, 1)))
	}
	if c.cfg.Errors > 0 {
		n := c.cfg.ErrorBytes
		if n <= 0 {
			n = 64
		}
		body := strings.Repeat("e", n)
		for i := range c.cfg.Errors {
			w.Error("chaos", fmt.Errorf("%d/%d %s", c.collects, i, body))
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	if c.cfg.InvalidNames {
		w.Gauge(badName, 1)
		w.Gauge(badLabel, 1, "v")
	}
	if c.cfg.SharedFamily {
		w.Gauge(shared, 1, c.name)
	}
	if c.cfg.TypeConflict {
		w.Counter(sharedWrong, 1, c.name)
	}
	if c.cfg.HugeLabels {
		w.Gauge(huge, 1, hugeValue)
	}
	if c.cfg.Flood {
		// Until the host cancels the stream (or the deadline ends it): a
		// plugin gone wild must cost its own series, not the host's memory.
		for i := 0; ctx.Err() == nil; i++ {
			w.Gauge(flood, float64(i), c.name, strconv.Itoa(i))
		}
	}
	return nil
}

// Close is called by the SDK when the host stops the plugin.
func (c *chaos) Close() error {
	if c.cfg.CloseFile == "" {
		return nil
	}
	return os.WriteFile(c.cfg.CloseFile, []byte("closed\n"), 0o644)
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "plexporter-")
	sdk.Serve(&chaos{name: name})
}

// gone is closed once path no longer exists (polled: the file is a test's
// release of a Collect it holds); polling ends with stop.
func gone(path string, stop <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		for {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				close(c)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return c
}
