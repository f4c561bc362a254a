package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/plexporter/plexporter/internal/dev/proctree"
)

// pace is how often the exporters are scraped: every `every` (0: back to
// back).
type pace struct {
	name  string
	every time.Duration
}

// String says the pace in a sentence.
func (p pace) String() string {
	if p.every == 0 {
		return "scrapes back to back"
	}
	return "one scrape every " + p.name
}

// slowPace is where a pace counts as slow: its rounds are -scrapes-slow,
// not -scrapes.
const slowPace = 10 * time.Second

// parsePaces reads the -paces flag: durations separated by commas, 0 (or
// "back-to-back") for scrapes back to back, in the order given.
func parsePaces(s string) ([]pace, error) {
	var ps []pace
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "0" || f == "back-to-back" {
			ps = append(ps, pace{"back-to-back", 0})
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 || d > time.Hour {
			return nil, fmt.Errorf("bad -paces entry %q: want a duration in (0, 1h] or 0 for back to back", f)
		}
		ps = append(ps, pace{paceName(d), d})
	}
	return ps, nil
}

// paceName writes a duration as the report says it: "15 s", "500ms".
func paceName(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

// slotOffset is when, counted from the start of a paced measurement, the
// exporter in slot `slot` of n is scraped in round `round`. Back to back
// (every 0) there is no schedule. At a pace, rounds start every `every` and
// the n slots are spread evenly over a round, so that each exporter is
// left alone for `every` between two of its scrapes and its neighbours'
// scrapes are as far from its own as they can be.
func slotOffset(every time.Duration, n, round, slot int) time.Duration {
	if every == 0 || n <= 0 {
		return 0
	}
	return time.Duration(round)*every + time.Duration(slot)*every/time.Duration(n)
}

// slotExporter is the exporter scraped in slot `slot` of round `round`.
// Back to back, the order rotates every round (which exporter comes first
// alternates); at a pace each exporter keeps its slot, so that its period
// is the pace.
func slotExporter(every time.Duration, n, round, slot int) int {
	if every == 0 {
		return (slot + round) % n
	}
	return slot
}

// pacedCell is one exporter measured at a pace: sums over the rounds.
// A round is one scrape; its CPU is that of the exporter's processes from
// just before one of its scrapes to just before its next. The per-scrape
// figures are means over all rounds (the whole measurement's CPU divided
// by its scrapes: what a user pays per scrape, GCs and timers included),
// not medians of rounds (which would drop the rounds that paid for a GC).
type pacedCell struct {
	cpu, cpuMain, wall float64 // seconds, summed over the rounds
	period             float64 // seconds from one scrape to the next, summed
	rounds             int
	bytes              int64
}

func (c *pacedCell) add(cpu, cpuMain, wall, period float64, bytes int64) {
	c.cpu += cpu
	c.cpuMain += cpuMain
	c.wall += wall
	c.period += period
	c.bytes = bytes
	c.rounds++
}

func (c *pacedCell) mean(x float64) float64 {
	if c.rounds == 0 {
		return 0
	}
	return x / float64(c.rounds)
}

// CPU is the mean CPU per scrape of all the exporter's processes.
func (c *pacedCell) CPU() float64 { return c.mean(c.cpu) }

// HostCPU is the mean CPU per scrape of the main process (for a host: without plugins).
func (c *pacedCell) HostCPU() float64 { return c.mean(c.cpuMain) }

// Wall is the mean wall time of one scrape.
func (c *pacedCell) Wall() float64 { return c.mean(c.wall) }

// Period is the mean time from one scrape to the next (the pace held).
func (c *pacedCell) Period() float64 { return c.mean(c.period) }

// measurePaced scrapes each exporter once per round, rounds times, on the
// schedule of slotOffset and slotExporter (a scrape that is late, because
// the previous one took longer, starts at once). before runs at the start
// of each round, before any scrape (it may rewrite the files). A run is
// one round: the CPU of an exporter's processes from just before one of
// its scrapes to just before its next, so whatever it does between scrapes
// (GC, timers) counts, as it does for a user at that pace. rounds+1
// scrape times make rounds runs.
func (h *harness) measurePaced(es []*exporter, every time.Duration, rounds int, before func() error) ([]*pacedCell, error) {
	n := len(es)
	cells := make([]*pacedCell, n)
	prev := make([][2]float64, n) // CPU total, CPU of the main process
	last := make([]time.Time, n)
	wall, bytes := make([]time.Duration, n), make([]int64, n)
	for i := range cells {
		cells[i] = &pacedCell{}
	}
	start := time.Now()
	for round := range rounds + 1 {
		for slot := range n {
			if d := time.Until(start.Add(slotOffset(every, n, round, slot))); every > 0 && d > 0 {
				time.Sleep(d)
			}
			if slot == 0 && before != nil && round < rounds {
				if err := before(); err != nil {
					return nil, err
				}
			}
			i := slotExporter(every, n, round, slot)
			e := es[i]
			pids := e.pids()
			cpu, err := proctree.CPUSum(pids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			main, _ := proctree.CPUSum(pids[:1])
			now := time.Now()
			if round > 0 {
				cells[i].add(cpu-prev[i][0], main-prev[i][1], wall[i].Seconds(), now.Sub(last[i]).Seconds(), bytes[i])
			}
			prev[i], last[i] = [2]float64{cpu, main}, now
			if round == rounds {
				continue
			}
			t0 := time.Now()
			b, ctype, err := h.get(e.url+e.path, fmtText.accept, false)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			if !strings.HasPrefix(ctype, fmtText.ctype) {
				return nil, fmt.Errorf("%s: asked for text, got Content-Type %q", e.name, ctype)
			}
			wall[i], bytes[i] = time.Since(t0), b
		}
	}
	for _, e := range es {
		if err := e.alive(); err != nil {
			return nil, err
		}
	}
	return cells, nil
}

// perScrape is what a pace's table row needs of a measurement: a cell
// (back to back, medians of runs) or a pacedCell (means of rounds).
type perScrape interface {
	CPU() float64
	HostCPU() float64
	Wall() float64
}

// paceResult is one pace of a plexporter-vs-node_exporter comparison.
type paceResult struct {
	pace   pace
	counts string  // how it was measured: "5 runs of ≥ 400ms", "10 rounds"
	period float64 // the mean period held, seconds (0: back to back)
	P, N   perScrape
}

// cpuRatio is node_exporter's CPU per scrape over plexporter's (0 when
// plexporter's is 0: nothing was counted).
func (r paceResult) cpuRatio() float64 {
	if r.P.CPU() == 0 {
		return 0
	}
	return r.N.CPU() / r.P.CPU()
}

// paceTable is the markdown table of a comparison's paces; the row of
// pace `headline` has its ratio in bold.
func paceTable(rs []paceResult, headline time.Duration) string {
	var rows [][]string
	for _, r := range rs {
		period := "–"
		if r.pace.every > 0 {
			period = fmt.Sprintf("%.2f", r.period)
		}
		rt := ratio(r.N.CPU(), r.P.CPU())
		if r.pace.every == headline {
			rt = "**" + rt + "**"
		}
		rows = append(rows, []string{r.pace.name, r.counts, period,
			ms(r.N.CPU()), ms(r.P.CPU()), ms(r.P.HostCPU()), ms(r.P.CPU() - r.P.HostCPU()),
			rt, ms(r.N.Wall()), ms(r.P.Wall())})
	}
	return table([]string{"pace (one scrape of each every …)", "measured", "period held (s)",
		"node_exporter CPU ms", "plexporter CPU ms", "of it host", "of it plugin", "node_exporter / plexporter CPU",
		"node_exporter wall ms", "plexporter wall ms"}, rows)
}

// paceRatios says the CPU ratios of all paces in one line:
// "15 s: 1.50×, 1 s: 1.60×, back-to-back: 2.00×" (the headline first).
func paceRatios(rs []paceResult, headline time.Duration) string {
	var parts []string
	for _, r := range rs {
		s := r.pace.name + ": " + ratio(r.N.CPU(), r.P.CPU())
		if r.pace.every == headline {
			parts = append([]string{"**" + s + "**"}, parts...)
		} else {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}
