package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParsePaces(t *testing.T) {
	ps, err := parsePaces("0, 1s,15s,back-to-back,500ms")
	if err != nil {
		t.Fatal(err)
	}
	want := []pace{{"back-to-back", 0}, {"1 s", time.Second}, {"15 s", 15 * time.Second}, {"back-to-back", 0}, {"500ms", 500 * time.Millisecond}}
	if !slices.Equal(ps, want) {
		t.Errorf("parsePaces = %v, want %v", ps, want)
	}
	for _, bad := range []string{"", "fast", "-1s", "2h", "1s,,15s"} {
		if _, err := parsePaces(bad); err == nil {
			t.Errorf("parsePaces(%q): no error", bad)
		}
	}
	if s := (pace{"15 s", 15 * time.Second}).String(); s != "one scrape every 15 s" {
		t.Errorf("String = %q", s)
	}
}

// At a pace every exporter keeps its slot, the slots are spread evenly
// over the round and an exporter's scrapes are exactly the pace apart;
// back to back the order rotates and nothing waits.
func TestSchedule(t *testing.T) {
	const every = 15 * time.Second
	const n = 6
	for round := range 3 {
		for slot := range n {
			if got, want := slotOffset(every, n, round, slot), time.Duration(round)*every+time.Duration(slot)*2500*time.Millisecond; got != want {
				t.Errorf("slotOffset(round %d, slot %d) = %v, want %v", round, slot, got, want)
			}
			if got := slotExporter(every, n, round, slot); got != slot {
				t.Errorf("slotExporter(15s, round %d, slot %d) = %d, want the slot", round, slot, got)
			}
			if d := slotOffset(every, n, round+1, slot) - slotOffset(every, n, round, slot); d != every {
				t.Errorf("slot %d: %v between its scrapes, want %v", slot, d, every)
			}
			if slotOffset(0, n, round, slot) != 0 {
				t.Errorf("back to back waits")
			}
		}
	}
	var first []int
	for round := range 4 {
		first = append(first, slotExporter(0, 2, round, 0))
	}
	if !slices.Equal(first, []int{0, 1, 0, 1}) {
		t.Errorf("back to back, the first scraped per round: %v, want alternating", first)
	}
}

// The per-scrape figures are means over the rounds, so that 10 ms ticks
// average out; the ratio is node_exporter's over plexporter's.
func TestPacedCellMeansAndRatio(t *testing.T) {
	P, N := &pacedCell{}, &pacedCell{}
	// plexporter: 10 ms in 3 rounds of 4 (ticks), host 0 or 10 ms.
	for i, cpu := range []float64{0.01, 0, 0.01, 0.01} {
		P.add(cpu, float64(i%2)*0.01, 0.002, 15, 100)
	}
	for _, cpu := range []float64{0.02, 0.01, 0.02, 0.01} {
		N.add(cpu, cpu, 0.004, 15.02, 50)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if d := got - want; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("P.CPU", P.CPU(), 0.0075)
	near("P.HostCPU", P.HostCPU(), 0.005)
	near("P.Wall", P.Wall(), 0.002)
	near("P.Period", P.Period(), 15)
	near("N.Period", N.Period(), 15.02)
	r := paceResult{pace: pace{"15 s", 15 * time.Second}, P: P, N: N}
	near("cpuRatio", r.cpuRatio(), 2)
	if r := (paceResult{P: &pacedCell{}, N: N}); r.cpuRatio() != 0 {
		t.Errorf("cpuRatio with nothing counted = %v, want 0", r.cpuRatio())
	}
	if (&pacedCell{}).CPU() != 0 {
		t.Error("an empty cell's CPU is not 0")
	}
}

func TestPaceTableAndRatios(t *testing.T) {
	bb := &cell{cpu: []float64{0.003, 0.002, 0.004}, cpuMain: []float64{0.001, 0.001, 0.001}, wall: []float64{0.002, 0.002, 0.002}}
	nb := &cell{cpu: []float64{0.006, 0.006, 0.009}, cpuMain: []float64{0.006, 0.006, 0.009}, wall: []float64{0.006, 0.006, 0.006}}
	slowP := &pacedCell{cpu: 0.1, cpuMain: 0.04, wall: 0.05, period: 150, rounds: 10}
	slowN := &pacedCell{cpu: 0.15, cpuMain: 0.15, wall: 0.1, period: 150, rounds: 10}
	rs := []paceResult{
		{pace: pace{"back-to-back", 0}, counts: "5 runs of ≥ 400ms", P: bb, N: nb},
		{pace: pace{"15 s", 15 * time.Second}, counts: "10 rounds", period: 15.004, P: slowP, N: slowN},
	}
	got := paceTable(rs, 15*time.Second)
	want := "| pace (one scrape of each every …) | measured | period held (s) | node_exporter CPU ms | plexporter CPU ms | of it host | of it plugin | node_exporter / plexporter CPU | node_exporter wall ms | plexporter wall ms |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---|---:|---:|\n" +
		"| back-to-back | 5 runs of ≥ 400ms | – | 6.00 | 3.00 | 1.00 | 2.00 | 2.00× | 6.00 | 2.00 |\n" +
		"| 15 s | 10 rounds | 15.00 | 15.0 | 10.0 | 4.00 | 6.00 | **1.50×** | 10.0 | 5.00 |\n"
	if got != want {
		t.Errorf("paceTable:\n%s\nwant:\n%s", got, want)
	}
	if got, want := paceRatios(rs, 15*time.Second), "**15 s: 1.50×**, back-to-back: 2.00×"; got != want {
		t.Errorf("paceRatios = %q, want %q", got, want)
	}
}

// measurePaced: back to back, each exporter once per round in an order
// that alternates; at a pace, in fixed slots spread over the round. before
// runs once per round ahead of the scrapes; one run per round.
func TestMeasurePaced(t *testing.T) {
	for _, c := range []struct {
		every time.Duration
		want  []string
	}{
		{0, []string{"a", "b", "b", "a", "a", "b", "b", "a"}},
		{60 * time.Millisecond, []string{"a", "b", "a", "b", "a", "b", "a", "b"}},
	} {
		t.Run(fmt.Sprint(c.every), func(t *testing.T) {
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
			t0 := time.Now()
			cells, err := h.measurePaced(es, c.every, rounds, before)
			if err != nil {
				t.Fatal(err)
			}
			if elapsed := time.Since(t0); elapsed < rounds*c.every {
				t.Errorf("%d rounds at a %v pace took %v", rounds, c.every, elapsed)
			}
			if befores != rounds {
				t.Errorf("before ran %d times, want %d", befores, rounds)
			}
			if !slices.Equal(order, c.want) {
				t.Errorf("scrape order %v, want %v", order, c.want)
			}
			for i, cl := range cells {
				if cl.rounds != rounds || cl.bytes != 4 {
					t.Errorf("exporter %d: %d rounds, %d bytes; want %d, 4", i, cl.rounds, cl.bytes, rounds)
				}
				// Sleeps only end late, but a late scrape shortens the next period.
				if c.every > 0 && cl.Period() < 0.8*c.every.Seconds() {
					t.Errorf("exporter %d: period %.3f s, below the pace", i, cl.Period())
				}
			}
		})
	}
}

func TestReportOrdersSectionsByID(t *testing.T) {
	r := &report{}
	for _, id := range []string{"1", "2", "7", "4", "8"} {
		r.add(&section{id: id, title: "s" + id})
	}
	md := r.markdown()
	last := -1
	for _, id := range []string{"1", "2", "4", "7", "8"} {
		i := strings.Index(md, "## "+id+". s"+id)
		if i < last {
			t.Errorf("section %s out of order", id)
		}
		last = i
	}
}
