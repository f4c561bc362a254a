package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The fixture writer writes the files' series as node_exporter and the
// plugin parse them: files × series samples, 0644, only *.prom names left
// behind; a new version changes every file's content and mtime.
func TestWriteTextfiles(t *testing.T) {
	dir := t.TempDir()
	const files, series = 12, 30
	if err := writeTextfiles(dir, files, series, 0); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != files {
		t.Fatalf("%d entries, want %d files", len(ents), files)
	}
	first := map[string][]byte{}
	mtimes := map[string]time.Time{}
	seen := map[string]bool{}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".prom" {
			t.Errorf("%s left behind", e.Name())
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %04o, want 0644", e.Name(), fi.Mode().Perm())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		first[e.Name()], mtimes[e.Name()] = b, fi.ModTime()
		if !bytes.HasSuffix(b, []byte("\n")) {
			t.Errorf("%s does not end in a newline", e.Name())
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := parser.TextToMetricFamilies(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if len(mfs) != series/10 {
			t.Errorf("%s: %d families, want %d", e.Name(), len(mfs), series/10)
		}
		n := 0
		for name, mf := range mfs {
			if mf.GetHelp() == "" || mf.GetType().String() != "GAUGE" {
				t.Errorf("%s: %s: help %q, type %s", e.Name(), name, mf.GetHelp(), mf.GetType())
			}
			for _, m := range mf.GetMetric() {
				n++
				// No series twice, in one file or two.
				key := name + m.String()
				if seen[key] {
					t.Errorf("%s: series %s repeated", e.Name(), key)
				}
				seen[key] = true
			}
		}
		if n != series {
			t.Errorf("%s: %d series, want %d", e.Name(), n, series)
		}
	}
	if len(seen) != files*series {
		t.Fatalf("%d distinct series, want %d", len(seen), files*series)
	}

	time.Sleep(20 * time.Millisecond) // past the file system's timestamp granularity
	if err := writeTextfiles(dir, files, series, 1); err != nil {
		t.Fatal(err)
	}
	for name, b := range first {
		b2, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b, b2) || !fi.ModTime().After(mtimes[name]) {
			t.Errorf("%s: version 1 has the same content (%v) or no later mtime (%v, %v)", name, bytes.Equal(b, b2), mtimes[name], fi.ModTime())
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != files {
		t.Errorf("%d entries after the rewrite, want %d", len(ents), files)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// measurePaced scrapes each exporter once per round in an order that
// alternates, runs before once per round ahead of the scrapes, makes one
// run per round and holds the pace.
func TestMeasurePaced(t *testing.T) {
	var mu sync.Mutex
	var order []string
	var srvs []*httptest.Server
	var es []*exporter
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprintln(w, "x 1")
		}))
		defer srv.Close()
		srvs = append(srvs, srv)
		// The harness's own process stands in for the exporter's.
		p := &proc{name: name, cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}, url: srv.URL, done: make(chan struct{})}
		es = append(es, &exporter{proc: p, path: "/metrics"})
	}
	h := &harness{client: srvs[0].Client(), started: time.Now()}
	const rounds = 4
	befores := 0
	before := func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(order) != 2*befores {
			t.Errorf("before call %d after %d scrapes, want %d", befores+1, len(order), 2*befores)
		}
		befores++
		return nil
	}
	const every = 50 * time.Millisecond
	t0 := time.Now()
	cells, err := h.measurePaced(es, every, rounds, before)
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(t0); elapsed < rounds*every {
		t.Errorf("%d rounds at a %v pace took %v", rounds, every, elapsed)
	}
	if befores != rounds {
		t.Errorf("before ran %d times, want %d", befores, rounds)
	}
	want := []string{"a", "b", "b", "a", "a", "b", "b", "a"}
	if !slices.Equal(order, want) {
		t.Errorf("scrape order %v, want %v", order, want)
	}
	for i, c := range cells {
		if len(c.cpu) != rounds || c.scrapes != rounds || c.bytes != 4 {
			t.Errorf("exporter %d: %d runs, %d scrapes, %d bytes; want %d, %d, 4", i, len(c.cpu), c.scrapes, c.bytes, rounds, rounds)
		}
		if c.period < 0.8*every.Seconds() { // the order alternates: a period may be a scrape short
			t.Errorf("exporter %d: period %.3f s, below the pace", i, c.period)
		}
	}
}
