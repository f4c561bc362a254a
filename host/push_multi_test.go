package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPushToTwoTargetsOneDown runs the host with three push targets of
// one interval: Debian's Prometheus (remote write 1.0), an OTLP receiver
// of the OTLP protos, and a remote write 2.0 target that answers 503
// forever. The two receivers get every snapshot, in order, the same
// snapshots (one scrape round each interval for all three); the down
// target's samples wait in its own ring, from that same first snapshot.
// Every plexporter_push_* series carries remote_name and url. SIGTERM
// flushes every target at once.
func TestPushToTwoTargetsOneDown(t *testing.T) {
	bin := prometheusBinary(t)
	addr := freePort(t)
	startReceiverAt(t, bin, addr)
	otel := &snapshots{}
	otelSrv := httptest.NewServer(otlpReceiver(otel))
	defer otelSrv.Close()
	downSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer downSrv.Close()
	h := startHost(t, []string{"alpha"}, fmt.Sprintf(`  alpha: {config: {series: 2}}
push:
  - name: prom
    url: http://%s/api/v1/write
    interval: 1s
    external_labels: {job: pushed}
  - name: otel
    url: %s/v1/metrics
    protocol: otlp
    interval: 1s
    external_labels: {job: pushed}
  - name: down
    url: %s/api/v1/write
    protocol: prometheus.remote_write.v2
    interval: 1s
    max_backoff: 200ms
    flush_timeout: 1s
`, addr, otelSrv.URL, downSrv.URL))

	h.waitFor(minWait, "5 snapshots at the OTLP receiver while the third target is down", func() bool {
		_, mfs := h.scrape("")
		return len(otelStamps(otel)) >= 5 && value(mfs, "plexporter_push_samples_failed_total", "remote_name", "down") > 0
	})
	_, mfs := h.scrape("")
	urls := map[string]string{"prom": "http://" + addr + "/api/v1/write", "otel": otelSrv.URL + "/v1/metrics", "down": downSrv.URL + "/api/v1/write"}
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "plexporter_push_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if u, ok := urls[l["remote_name"]]; !ok || l["url"] != u {
				t.Errorf("%s%v: want the remote_name and url of a target", name, l)
			}
		}
	}
	if v := value(mfs, "plexporter_push_samples_sent_total", "remote_name", "down"); v != 0 {
		t.Errorf("the down target sent %v samples", v)
	}
	// The down target retries the first snapshot the others sent: the
	// three take one snapshot a round.
	oldest := value(mfs, "plexporter_push_oldest_unsent_timestamp_seconds", "remote_name", "down")
	if first := otelStamps(otel)[0]; int64(math.Round(oldest*1000)) != first {
		t.Errorf("the down target's oldest unsent snapshot is from %v, the OTLP receiver's first from %v: not the same snapshots", oldest, float64(first)/1000)
	}

	logs := h.stop()
	if !strings.Contains(logs, "remote_name=down") || !strings.Contains(logs, "samples still unsent at shutdown were dropped") {
		t.Errorf("the down target's shutdown drop is not logged with its name")
	}
	stamps := otelStamps(otel)
	if !slices.IsSorted(stamps) || len(slices.Compact(slices.Clone(stamps))) != len(stamps) {
		t.Errorf("OTLP snapshots arrived out of order: %v", stamps)
	}
	prom := rawStamps(t, "http://"+addr, `plexporter_build_info{job="pushed"}[1h]`)
	if !slices.Equal(prom, stamps) {
		t.Errorf("Prometheus holds plexporter_build_info at\n%v\nthe OTLP receiver got snapshots at\n%v\nwant the same snapshots, every one", prom, stamps)
	}
	t.Logf("%d snapshots at both receivers", len(stamps))
}

// otelStamps returns the timestamps (ms) of the snapshots the OTLP
// receiver got, in the order they arrived: those with the host's
// plexporter_build_info.
func otelStamps(s *snapshots) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, ts := range s.order {
		if slices.ContainsFunc(s.by[ts], func(ps pushedSeries) bool { return ps.metric["__name__"] == "plexporter_build_info" }) {
			out = append(out, ts)
		}
	}
	return out
}

// rawStamps returns the timestamps (ms) of the raw samples of a range
// selector q.
func rawStamps(t *testing.T, promURL, q string) []int64 {
	t.Helper()
	resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Data.Result) != 1 {
		t.Fatalf("%s: %d series, want 1", q, len(body.Data.Result))
	}
	var out []int64
	for _, v := range body.Data.Result[0].Values {
		f, err := strconv.ParseFloat(fmt.Sprint(v[0]), 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, int64(f*1000+0.5))
	}
	return out
}

// TestPushFlagBesideATargetListIsAnError: the --push.* flags set the one
// target; beside a list of targets in the file they are refused, naming
// the flag and the file, before anything starts.
func TestPushFlagBesideATargetListIsAnError(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "plexporter.yml")
	if err := os.WriteFile(cfg, []byte("push:\n  - {name: a, url: http://127.0.0.1:1/a}\n  - {name: b, url: http://127.0.0.1:1/b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "plexporter"), "--plugin.dir="+t.TempDir(), "--config.file="+cfg, "--web.listen-address="+freePort(t), "--no-plugin.sandbox", "--push.interval=5s")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1; output:\n%s", err, out)
	}
	for _, want := range []string{"--push.interval", cfg, "is a list of 2 targets"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error does not say %q:\n%s", want, out)
		}
	}
}
