package main

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// exposition is one scrape of the host's /metrics, by family name.
type exposition map[string]*dto.MetricFamily

// scraper scrapes the installed host. Under TCG one scrape of every plugin
// takes seconds, so the client waits far longer than a Prometheus would.
type scraper struct {
	url    string
	client *http.Client
}

func newScraper(url string) *scraper {
	return &scraper{url: url, client: &http.Client{Timeout: 90 * time.Second}}
}

func (s *scraper) scrape() (exposition, error) {
	resp, err := s.client.Get(s.url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %s", s.url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse the exposition of %s: %w", s.url, err)
	}
	return families, nil
}

// series returns the samples of family name whose labels include every
// pair of want (name, value, name, value, ...).
func (e exposition) series(name string, want ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range e[name].GetMetric() {
		if hasLabels(m, want) {
			out = append(out, m)
		}
	}
	return out
}

// value is the one sample of family name matching want; it is an error
// when there is none or more than one, naming the family and the labels.
func (e exposition) value(name string, want ...string) (float64, error) {
	s := e.series(name, want...)
	switch len(s) {
	case 1:
		return sampleValue(s[0]), nil
	case 0:
		return 0, fmt.Errorf("no series %s{%s} (family has %d series)", name, pairs(want), len(e[name].GetMetric()))
	default:
		return 0, fmt.Errorf("%d series %s{%s}, want one", len(s), name, pairs(want))
	}
}

// families lists the names with prefix that have a series matching want.
func (e exposition) families(prefix string, want ...string) []string {
	var out []string
	for name := range e {
		if strings.HasPrefix(name, prefix) && len(e.series(name, want...)) > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func hasLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if label(m, want[i]) != want[i+1] {
			return false
		}
	}
	return true
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

func pairs(want []string) string {
	var b strings.Builder
	for i := 0; i+1 < len(want); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", want[i], want[i+1])
	}
	return b.String()
}
