package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	concScrapers  = 16
	concPlugins   = 6
	concDuration  = 3 * time.Second
	concMaxEach   = 2000 // scrapes per scraper, at most
	chaosSeries   = 2000
	chaosHists    = 100
	chaosSleep    = "20ms" // a collect that takes time, like reading a device
	sequentialMax = 40
)

var collectsLine = regexp.MustCompile(`(?m)^chaos_collects_total\{plugin="([^"]+)"\} (\S+)$`)

// collects scrapes once and returns chaos_collects_total per plugin (that
// scrape's own collect included).
func (h *harness) collects(e *exporter) (map[string]float64, error) {
	body, err := h.getBody(e.url + e.path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range collectsLine.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[m[1]] = v
	}
	return out, nil
}

type loadResult struct {
	scrapes, errors int
	firstErr        string
	latencies       []float64
	elapsed         float64
	collects        map[string]float64 // per plugin, during the load
}

// load runs `scrapers` scrapers against e for d (each at most max scrapes)
// and counts the plugins' collects meanwhile. A scrape is an error if it
// fails, is not 200, or lacks a series of any plugin.
func (h *harness) load(e *exporter, scrapers int, d time.Duration, maxEach int, plugins []string) (*loadResult, error) {
	before, err := h.collects(e)
	if err != nil {
		return nil, err
	}
	res := &loadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	markers := make([][]byte, len(plugins))
	for i, p := range plugins {
		markers[i] = []byte(`chaos_collects_total{plugin="` + p + `"}`)
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: scrapers}}
	t0 := time.Now()
	deadline := t0.Add(d)
	for range scrapers {
		wg.Go(func() {
			var buf bytes.Buffer
			for range maxEach {
				if time.Now().After(deadline) {
					return
				}
				began := time.Now()
				buf.Reset()
				errText := ""
				resp, err := client.Get(e.url + e.path)
				if err != nil {
					errText = err.Error()
				} else {
					_, err = io.Copy(&buf, resp.Body)
					resp.Body.Close()
					switch {
					case err != nil:
						errText = err.Error()
					case resp.StatusCode != 200:
						errText = fmt.Sprintf("status %d: %.100s", resp.StatusCode, buf.String())
					default:
						for i, m := range markers {
							if !bytes.Contains(buf.Bytes(), m) {
								errText = "plugin " + plugins[i] + " missing from the scrape"
								break
							}
						}
					}
				}
				lat := time.Since(began).Seconds()
				mu.Lock()
				res.scrapes++
				res.latencies = append(res.latencies, lat)
				if errText != "" {
					res.errors++
					if res.firstErr == "" {
						res.firstErr = errText
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(t0).Seconds()
	after, err := h.collects(e)
	if err != nil {
		return nil, err
	}
	res.collects = map[string]float64{}
	for _, p := range plugins {
		// minus the collect of the scrape that read "after"
		res.collects[p] = after[p] - before[p] - 1
	}
	return res, nil
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// scenarioConcurrency is scenario 6.
func (h *harness) scenarioConcurrency() error {
	sec := &section{id: "6", title: fmt.Sprintf("Concurrency: %d scrapers against %d plugins", concScrapers, concPlugins)}
	defer h.report.add(sec)
	if _, err := os.Stat(h.chaosBin()); err != nil {
		sec.skipped = h.chaosBin() + " is not built (`make bench` builds it)."
		return nil
	}
	spec := hostSpec{name: "concurrency", plugins: map[string]string{}, args: []string{"--log.level=warn"}}
	var plugins []string
	var cfg strings.Builder
	for i := range concPlugins {
		name := "chaos" + strconv.Itoa(i+1)
		plugins = append(plugins, name)
		spec.plugins[name] = h.chaosBin()
		fmt.Fprintf(&cfg, "  %s: {timeout: 30s, config: {series: %d, histograms: %d, sleep: %q}}\n", name, chaosSeries, chaosHists, chaosSleep)
	}
	spec.config = cfg.String()
	e, err := h.startHost(spec)
	if err != nil {
		return err
	}
	// Control: one scraper, one scrape at a time: every scrape starts one
	// collect per plugin, so collects == scrapes validates the counting.
	seq, err := h.load(e, 1, concDuration/2, sequentialMax, plugins)
	if err != nil {
		return err
	}
	par, err := h.load(e, concScrapers, concDuration, concMaxEach, plugins)
	if err != nil {
		return err
	}
	if err := e.alive(); err != nil {
		return err
	}
	row := func(label string, r *loadResult) []string {
		var cs []float64
		for _, p := range plugins {
			cs = append(cs, r.collects[p])
		}
		lo, hi := slicesMin(cs), slicesMax(cs)
		return []string{label, fmt.Sprint(r.scrapes), fmt.Sprintf("%.1f", float64(r.scrapes)/r.elapsed),
			fmt.Sprintf("%.0f–%.0f", lo, hi), fmt.Sprintf("%.1f", hi/r.elapsed), fmt.Sprintf("%.2f", hi/float64(r.scrapes)),
			ms(percentile(r.latencies, 0.5)), ms(percentile(r.latencies, 0.99)), fmt.Sprint(r.errors)}
	}
	sec.text = append(sec.text, fmt.Sprintf("%d chaos plugins (test-only), each %d gauges and %d 10-bucket histograms (%d series per plugin) "+
		"and a collect that sleeps %s, like a plugin waiting for a device. Collects are read from each plugin's "+
		"`chaos_collects_total` before and after (minus the reading scrape's own collect). A scrape counts as an "+
		"error if it fails, is not 200, or lacks any plugin's series.",
		concPlugins, chaosSeries, chaosHists, chaosSeries+13*chaosHists, chaosSleep))
	sec.text = append(sec.text, table([]string{"scrapers", "scrapes", "scrapes/s", "collects per plugin", "collects/s (max plugin)", "collects / scrapes", "p50 ms", "p99 ms", "errors"},
		[][]string{row("1 (sequential control)", seq), row(fmt.Sprint(concScrapers), par)}))
	if par.firstErr != "" {
		sec.text = append(sec.text, "First error: `"+par.firstErr+"`")
	}
	maxCollects := 0.0
	for _, p := range plugins {
		maxCollects = max(maxCollects, par.collects[p])
	}
	sec.text = append(sec.text, fmt.Sprintf("With %d scrapers, one collect per plugin served %.1f scrapes on average (coalescing).", concScrapers, float64(par.scrapes)/maxCollects))
	// With one collect in flight per plugin, a plugin cannot collect more
	// often than once per collect duration (the chaos sleep).
	sleep, _ := time.ParseDuration(chaosSleep)
	serial := par.elapsed/sleep.Seconds() + 1
	sec.text = append(sec.text, fmt.Sprintf("One collect in flight per plugin allows at most %.0f collects in %.1f s (a collect sleeps %s); "+
		"the busiest plugin collected %.0f times.", serial, par.elapsed, chaosSleep, maxCollects))
	h.report.boolean("6", fmt.Sprintf("%d scrapers × %d plugins: collects ≤ scrapes, at most one collect in flight per plugin, no errors", concScrapers, concPlugins),
		fmt.Sprintf("%.0f collects (busiest plugin) for %d scrapes in %.1f s (serial bound %.0f); %d errors",
			maxCollects, par.scrapes, par.elapsed, serial, par.errors+seq.errors),
		maxCollects <= float64(par.scrapes) && maxCollects <= serial && par.errors == 0 && seq.errors == 0)
	return nil
}
