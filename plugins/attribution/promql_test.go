package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// readmeResults are the results the README's PromQL examples must give
// over the fixture (fixturePods, a job-mapping directory naming job 4242
// on mlx5_2, testdata/procjobs.ttar's processes with cgroup_jobs, the
// queue pairs of fixtureRDMA) and the synthetic series of promqlTarget: by the label
// named, the value. A rate over [5m] from a Prometheus that started
// seconds ago is the increase it has seen divided by 300 s, so for the
// rates only the proportions are checked (each within 10 % of the same
// fraction of the value), which is what the joins decide.
var readmeResults = map[string]struct {
	label string
	want  map[string]float64
	rate  bool
}{
	`sum by (namespace, pod) (rate(rdma_port_xmit_data_total[5m]) * on (instance, device) group_left (namespace, pod) device_pod_info{device_kind="rdma"})`: {
		"pod", map[string]float64{"trainer-0": 1000, "trainer-1": 2000}, true},
	`sum by (job_id) (rate(rdma_port_rcv_errors_total[5m]) * on (instance, device) group_left (job_id) device_job_info)`: {
		"job_id", map[string]float64{"4242": 10}, true},
	`nvme_media_errors_total * on (instance, device) group_left (namespace, pod) device_pod_info{device_kind="nvme"}`: {
		"pod", map[string]float64{"db-0": 3}, false},
	`device_allocatable_info{device_kind="pci"} unless on (instance, device) device_pod_info`: {
		"device", map[string]float64{"0000:3b:00.3": 1}, false},
	// Job 4242 is on mlx5_2 in both sources: the or keeps one series.
	`sum by (job_id) (rate(rdma_port_rcv_errors_total[5m]) * on (instance, device) group_left (job_id) (device_job_info or on (instance, device, job_id) device_cgroup_job_info{device_kind="rdma"}))`: {
		"job_id", map[string]float64{"4242": 10, "77": 5}, true},
	`sum by (instance, job_id) (rdma_qp_owner_queue_pairs{job_id!=""})`: {
		"job_id", map[string]float64{"4242": 3, "77": 1}, false},
}

var promqlBlock = regexp.MustCompile("(?s)```promql\n(.*?)\n```")

// TestREADMEPromQL runs every PromQL example of README.md against a real
// Prometheus scraping this plugin's output beside synthetic rdma and nvme
// counters, and checks each result.
func TestREADMEPromQL(t *testing.T) {
	bin := sdktest.PrometheusBinary(t, "prometheus")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, m := range promqlBlock.FindAllStringSubmatch(string(readme), -1) {
		queries = append(queries, m[1])
		if _, ok := readmeResults[m[1]]; !ok {
			t.Errorf("README.md's example %s has no expected result in readmeResults", m[1])
		}
	}
	if len(queries) != len(readmeResults) {
		t.Errorf("README.md has %d PromQL examples, readmeResults %d", len(queries), len(readmeResults))
	}

	k := fixtureKubelet(t)
	jobs := t.TempDir()
	writeFile(t, filepath.Join(jobs, "mlx5_2"), "4242\n")
	opts := options(t, k, map[string]any{"job_mapping_dir": jobs, "cgroup_jobs": true, "rdma_qp_owners": true})
	opts.Sysfs, opts.Procfs = procJobs(t) // the sriov fixture's sysfs and more
	p := newPlugin()
	p.dial = fakeRDMAKernel(t, fixtureRDMA())
	res := sdktest.Run(t, p, opts)
	if len(res.Errors) != 0 {
		t.Fatalf("errors %v", res.Errors)
	}
	target := promqlTarget(t, res.Text(t))
	promURL := startPrometheus(t, bin, target)

	// Every query is evaluated at one instant at, safely in the past: a
	// moment whose 5 s lookback already held three scrapes of the target
	// when it was at least 5 s old, so that no scrape still being appended
	// can change an answer, and every query sees the same samples.
	var at time.Time
	for deadline := time.Now().Add(waitPrometheus); ; time.Sleep(500 * time.Millisecond) {
		at = time.Now().Add(-5 * time.Second)
		if up := query(t, promURL, "count_over_time(up[5m])", "job", at); up["node"] >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape the target three times in %s", waitPrometheus)
		}
	}
	for _, q := range queries {
		want := readmeResults[q]
		got := query(t, promURL, q, want.label, at)
		if !matches(got, want.want, want.rate) {
			t.Errorf("%s\n= %v at %s, want %v", q, got, at.Format(time.RFC3339Nano), want.want)
		}
	}
}

// waitPrometheus bounds the wait for Prometheus to start and scrape: it
// only matters when the test fails.
const waitPrometheus = 120 * time.Second

// matches reports whether got has want's keys only, each within 10 % of
// its value or, for a rate, of the same positive fraction of it.
func matches(got, want map[string]float64, rate bool) bool {
	if len(got) != len(want) {
		return false
	}
	scale := 1.0
	if rate {
		scale = math.NaN()
		for k, w := range want {
			scale = got[k] / w
			break
		}
		if !(scale > 0) {
			return false
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || math.Abs(g-w*scale) > w*scale/10 {
			return false
		}
	}
	return true
}

// promqlTarget serves the plugin's exposition followed by the counters
// of the other plugins that the examples join: transmit data of mlx5_2 and
// mlx5_3 growing at 1000/s and 2000/s, receive errors of mlx5_2 at 10/s
// and of rxe0 at 5/s,
// and nvme0's media errors at 3.
func promqlTarget(t *testing.T, plugin string) string {
	start := time.Now()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Wall-clock time, as Prometheus stamps the samples: the
		// monotonic clock of a VM may run at another rate.
		s := float64(time.Now().UnixNano()-start.UnixNano()) / 1e9
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, plugin)
		fmt.Fprintf(w, "# TYPE rdma_port_xmit_data_total counter\n"+
			"rdma_port_xmit_data_total{device=\"mlx5_2\",port=\"1\"} %g\n"+
			"rdma_port_xmit_data_total{device=\"mlx5_3\",port=\"1\"} %g\n"+
			"# TYPE rdma_port_rcv_errors_total counter\n"+
			"rdma_port_rcv_errors_total{device=\"mlx5_2\",port=\"1\"} %g\n"+
			"rdma_port_rcv_errors_total{device=\"rxe0\",port=\"1\"} %g\n"+
			"# TYPE nvme_media_errors_total counter\n"+
			"nvme_media_errors_total{device=\"nvme0\"} 3\n", 1000*s, 2000*s, 10*s, 5*s)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// startPrometheus runs a Prometheus server scraping target every second
// and returns its URL; it stops with the test and logs its output if the
// test failed.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: [%q]\n", target))
	addr := freeAddr(t)
	prom := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logs := &syncbuf.Buffer{}
	prom.Stdout, prom.Stderr = logs, logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Process.Kill()
		prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	return "http://" + addr
}

// query runs an instant query evaluated at at and returns the result
// vector's values by label; nil while Prometheus is not up or the query
// fails.
func query(t *testing.T, promURL, q, label string, at time.Time) map[string]float64 {
	t.Helper()
	v := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64)}}
	resp, err := http.Get(promURL + "/api/v1/query?" + v.Encode())
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		return nil
	}
	if body.Status != "success" {
		t.Logf("%s: %s", q, body.Error)
		return nil
	}
	out := map[string]float64{}
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		out[r.Metric[label]], _ = strconv.ParseFloat(s, 64)
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
