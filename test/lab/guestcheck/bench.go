package main

// make lab-bench (guestcheck -bench): the rdma scenario of the bench
// harness (internal/dev/bench, scenario 2) on the guest's real kernel:
// the rxe devices guest.sh made, no file-system fixture. Debian's
// node_exporter with only its infiniband collector, and the installed
// plexporter host with only the installed rdma plugin, sandboxed under its
// shipped manifest, configured as the harness configures it (no netlink:
// node_exporter reads none). CPU per scrape is measured as the harness
// measures it (pace.go's measurePaced, measure.go's compare): each
// exporter's process tree, CPU clock of every process; back to back the
// exporters alternate in runs of at least -bench.min-run, medians of the
// runs; at a pace both are scraped on one schedule, one scrape each per
// round, half a period apart, a round's CPU from just before one scrape to
// just before the next, means over the rounds. A third exporter on the
// same schedule is the same host and plugin on a tmpfs copy of the
// devices' sysfs directories: the plugin on the real kernel against the
// plugin on the kind of tree the harness's fixtures are. Under TCG the
// absolute figures are the emulator's; the ratios are what this reports.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/internal/dev/proctree"
)

type benchOptions struct {
	runs, scrapes, scrapesSlow int
	minRun                     time.Duration
	paces                      string
}

const (
	benchNEAddr   = "127.0.0.1:9886"
	benchHostAddr = "127.0.0.1:9887"
	benchCopyAddr = "127.0.0.1:9888"
	snapshotRoot  = "/run/rxe-copy"
	nodeExporter  = "/usr/bin/prometheus-node-exporter"
	benchDir      = "/run/plexporter-bench"
	benchOut      = "/mnt/host/out"
	slowPace      = 10 * time.Second
)

// benchExporter is one exporter under measurement: its process and every
// process below it (the sandboxed plugin runs below its launcher).
type benchExporter struct {
	name, url string
	cmd       *exec.Cmd
	pids      []int
}

func (e *benchExporter) refreshPids() {
	e.pids = append([]int{e.cmd.Process.Pid}, proctree.Descendants(e.cmd.Process.Pid)...)
}

func (e *benchExporter) stop() {
	if e == nil || e.cmd == nil || e.cmd.Process == nil {
		return
	}
	e.cmd.Process.Signal(unix.SIGTERM)
	done := make(chan struct{})
	go func() { e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		e.cmd.Process.Kill()
		<-done
	}
}

func (e *benchExporter) alive() error {
	for _, pid := range e.pids {
		if _, err := proctree.ReadStat(pid); err != nil {
			return fmt.Errorf("%s: process %d is gone (crash or restart? out/bench-%s.log)", e.name, pid, e.name)
		}
	}
	return nil
}

func startBenchProc(name, url string, bin string, args ...string) (*benchExporter, error) {
	logf, err := os.Create(filepath.Join(benchOut, "bench-"+name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &benchExporter{name: name, url: url, cmd: cmd}, nil
}

var benchClient = &http.Client{Timeout: 120 * time.Second}

// get scrapes url as text 0.0.4 and returns the body's length (body
// non-nil: the body too).
func benchGet(url string, keep bool) (int64, []byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := benchClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if keep {
		b, err := io.ReadAll(resp.Body)
		return int64(len(b)), b, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	return n, nil, err
}

// waitBody scrapes url until ok accepts the body, or fails after timeout;
// the last body it got is out/bench-<name>-metrics.txt either way.
func waitBody(e *benchExporter, timeout time.Duration, what string, ok func(body string) bool) (string, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		_, b, err := benchGet(e.url, true)
		if b != nil {
			os.WriteFile(filepath.Join(benchOut, "bench-"+e.name+"-metrics.txt"), b, 0o644)
		}
		if err == nil && ok(string(b)) {
			return string(b), nil
		}
		last = err
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s: not within %s: %s (last error %v; out/bench-%s.log, out/bench-%s-metrics.txt)", e.name, timeout, what, last, e.name, e.name)
		}
		time.Sleep(time.Second)
	}
}

// hasDeviceSeries: the body has, for each device, a sample line of a
// family starting with prefix whose labels include device="<device>".
func hasDeviceSeries(prefix string, devs []string) func(string) bool {
	return func(body string) bool {
		seen := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			for _, d := range devs {
				if strings.Contains(line, `device="`+d+`"`) {
					seen[d] = true
				}
			}
		}
		return len(seen) == len(devs)
	}
}

func runBench(o benchOptions, out string) error {
	paces, err := parseBenchPaces(o.paces)
	if err != nil {
		return err
	}
	devs, err := rxeDevices()
	if err != nil || len(devs) == 0 {
		return fmt.Errorf("no rxe device in %s (%v): guest.sh makes them", ibClass, err)
	}
	if _, err := os.Stat(nodeExporter); err != nil {
		return fmt.Errorf("%w: build-initramfs.sh puts Debian's node_exporter in the guest only with LAB_BENCH=1 (make lab-bench)", err)
	}
	ne, err := startBenchProc("node_exporter", "http://"+benchNEAddr+"/metrics", nodeExporter,
		"--collector.disable-defaults", "--collector.infiniband", "--web.listen-address="+benchNEAddr)
	if err != nil {
		return err
	}
	defer ne.stop()
	plex, err := startBenchHost()
	if err != nil {
		return err
	}
	defer plex.stop()
	// node_exporter is up when its infiniband collector has run; plexporter
	// when every device is in its body. Debian's node_exporter 1.5.0 reads
	// no rxe device: its procfs needs ports/<n>/counters/ (the PMA
	// counters), which soft-RoCE does not have, and the collector takes the
	// missing directory for "no InfiniBand here" (success 0, no series).
	nb, err := waitBody(ne, 120*time.Second, "node_scrape_collector_success{collector=\"infiniband\"}", func(b string) bool {
		return strings.Contains(b, `node_scrape_collector_success{collector="infiniband"}`)
	})
	if err != nil {
		return err
	}
	neSees := hasDeviceSeries("node_infiniband_", devs)(nb)
	pb, err := waitBody(plex, 300*time.Second, "rdma_port_info for every rxe device", hasDeviceSeries("rdma_port_info{", devs))
	if err != nil {
		return err
	}
	if !strings.Contains(pb, `plexporter_plugin_sandboxed{plugin="rdma"} 1`) {
		return fmt.Errorf("the rdma plugin is not sandboxed (plexporter_plugin_sandboxed; out/bench-plexporter.log)")
	}
	// The third exporter, plexporter on a tmpfs copy of the same
	// directories: not fatal when it cannot be made.
	var snap *benchExporter
	var snapErr error
	var ss int
	if err := snapshotSysfs(devs); err != nil {
		snapErr = fmt.Errorf("copy the tree: %w", err)
	} else if snap, snapErr = startBenchHostOn("plexporter-copy", benchCopyAddr, snapshotRoot+"/sys", snapshotRoot); snapErr == nil {
		defer snap.stop()
		sb, err := waitBody(snap, 300*time.Second, "rdma_port_info for every rxe device", hasDeviceSeries("rdma_port_info{", devs))
		if err != nil {
			snap.stop()
			snap, snapErr = nil, err
		} else {
			ss = benchSeries(sb, "rdma_")
		}
	}
	if snapErr != nil {
		fmt.Fprintf(os.Stderr, "bench: no measurement on a tmpfs copy: %v\n", snapErr)
	}
	ne.refreshPids()
	plex.refreshPids()
	if len(plex.pids) < 2 {
		return fmt.Errorf("the plexporter host has no plugin process below it (%v)", plex.pids)
	}
	es := []*benchExporter{plex, ne}
	if snap != nil {
		snap.refreshPids()
		es = append(es, snap)
	}
	// Warm-up: two scrapes each, as the harness's compare.
	for _, e := range es {
		for range 2 {
			if _, _, err := benchGet(e.url, false); err != nil {
				return fmt.Errorf("%s: warm-up: %w", e.name, err)
			}
		}
	}
	var b strings.Builder
	uname, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	neVersion, _ := exec.Command(nodeExporter, "--version").CombinedOutput()
	fmt.Fprintf(&b, "## rdma on the lab guest's real sysfs: %d rxe devices × 1 port\n\n", len(devs))
	fmt.Fprintf(&b, "Kernel %s under QEMU TCG (2 vCPUs); devices %s (rxe0 on virtio-net eth0, the others on dummy netdevs). "+
		"node_exporter: Debian's `%s`, `--collector.disable-defaults --collector.infiniband`. plexporter: the installed host "+
		"with only the installed rdma plugin, sandboxed under its shipped manifest, `optional_counters: false, qp_counters: false` "+
		"(as the harness: node_exporter reads no netlink). Both as root, the installed lab host stopped. "+
		"TCG emulates every instruction: the absolute figures are the emulator's, only the ratios carry over.\n\n",
		strings.TrimSpace(string(uname)), strings.Join(devs, ", "), firstLine(string(neVersion)))
	ps, ns := benchSeries(pb, "rdma_"), benchSeries(nb, "node_infiniband_")
	fmt.Fprintf(&b, "| exporter | series (collector's) | series (whole body) | bytes |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| plexporter host + rdma plugin | %d `rdma_*` | %d | %d |\n", ps, benchSeries(pb), len(pb))
	fmt.Fprintf(&b, "| node_exporter | %d `node_infiniband_*` | %d | %d |\n\n", ns, benchSeries(nb), len(nb))
	if !neSees {
		fmt.Fprintf(&b, "**node_exporter reads none of the rxe devices** (`%s`, %d `node_infiniband_*` series): its "+
			"infiniband collector needs `ports/<n>/counters/` (the PMA counters), which soft-RoCE does not have, and "+
			"takes the missing directory for no InfiniBand at all. Its CPU per scrape below is that of a scrape that "+
			"lists the devices, reads their attributes and stops at the first port: not the same work as plexporter's, "+
			"so the ratio is not a comparison of the two on the same data.\n\n",
			benchLine(nb, `node_scrape_collector_success{collector="infiniband"}`), ns)
	}
	load0, _ := os.ReadFile("/proc/loadavg")
	type row struct {
		p        benchPace
		counts   string
		period   float64
		P, N     [3]float64 // CPU, CPU of the main process, wall: seconds per scrape
		S        [3]float64 // plexporter on the snapshot (zero without one)
		bytesP   int64
		headline bool
	}
	var rows []row
	headline := time.Duration(0)
	for _, p := range paces {
		headline = max(headline, p.every)
	}
	for _, p := range paces {
		if p.every == 0 {
			fmt.Fprintf(os.Stderr, "bench: back to back, %d runs of >= %v\n", o.runs, o.minRun)
			c, err := benchBackToBack(es, o.runs, o.minRun)
			if err != nil {
				return err
			}
			r := row{p: p, counts: fmt.Sprintf("%d runs of ≥ %v", o.runs, o.minRun), P: c[0], N: c[1]}
			if snap != nil {
				r.S = c[2]
			}
			rows = append(rows, r)
			continue
		}
		rounds := o.scrapes
		if p.every >= slowPace {
			rounds = o.scrapesSlow
		}
		fmt.Fprintf(os.Stderr, "bench: %s, %d rounds\n", p.name, rounds)
		cells, err := benchPaced(es, p.every, rounds)
		if err != nil {
			return err
		}
		r := row{p: p, counts: fmt.Sprintf("%d rounds", rounds), period: (cells[0].period + cells[1].period) / 2,
			P: cells[0].perScrape(), N: cells[1].perScrape(), headline: p.every == headline}
		if snap != nil {
			r.S = cells[2].perScrape()
		}
		rows = append(rows, r)
	}
	for _, e := range es {
		if err := e.alive(); err != nil {
			return err
		}
	}
	load1, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "| pace (one scrape of each every …) | measured | period held (s) | node_exporter CPU ms | plexporter CPU ms | of it host | of it plugin | node_exporter / plexporter CPU | node_exporter wall ms | plexporter wall ms |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	var ratios []string
	for _, r := range rows {
		period := "–"
		if r.p.every > 0 {
			period = fmt.Sprintf("%.2f", r.period)
		}
		rt := "–"
		if r.P[0] > 0 {
			rt = fmt.Sprintf("%.2f×", r.N[0]/r.P[0])
		}
		if !neSees && r.P[0] > 0 {
			rt = "(" + rt + ", not comparable)"
		}
		ratios = append(ratios, r.p.name+": "+rt)
		if r.headline {
			rt = "**" + rt + "**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f |\n", r.p.name, r.counts, period,
			r.N[0]*1e3, r.P[0]*1e3, r.P[1]*1e3, (r.P[0]-r.P[1])*1e3, rt, r.N[2]*1e3, r.P[2]*1e3)
	}
	fmt.Fprintf(&b, "\nnode_exporter / plexporter CPU per scrape: %s. Load average in the guest (1, 5, 15 min) before: %s; after: %s.\n",
		strings.Join(ratios, ", "), strings.Join(strings.Fields(string(load0))[:3], " "), strings.Join(strings.Fields(string(load1))[:3], " "))
	if snap != nil {
		fmt.Fprintf(&b, "\n**The same plugin on a file tree.** A third exporter on the same schedule: the installed host and rdma "+
			"plugin again, `--path.sysfs=%s/sys`, a copy on tmpfs of the %d devices' sysfs directories made before the "+
			"measurement (what the harness's fixture trees are: files, not kernfs; every attribute copied, an unreadable "+
			"one as an empty file; the counters no longer move); %d `rdma_*` series.\n\n", snapshotRoot, len(devs), ss)
		fmt.Fprintf(&b, "| pace | plexporter on sysfs CPU ms | plexporter on the tmpfs copy CPU ms | of it host | of it plugin | sysfs / copy CPU |\n|---|---|---|---|---|---|\n")
		for _, r := range rows {
			rt := "–"
			if r.S[0] > 0 {
				rt = fmt.Sprintf("%.2f×", r.P[0]/r.S[0])
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f | %s |\n", r.p.name, r.P[0]*1e3, r.S[0]*1e3, r.S[1]*1e3, (r.S[0]-r.S[1])*1e3, rt)
		}
	} else if snapErr != nil {
		fmt.Fprintf(&b, "\nThe plugin on a tmpfs copy of the tree was not measured: %v\n", snapErr)
	}
	if out == "" {
		fmt.Print(b.String())
		return nil
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// startBenchHost runs the installed host with only the installed rdma
// plugin and its shipped manifest, sandboxed (the default as root).
func startBenchHost() (*benchExporter, error) {
	return startBenchHostOn("plexporter", benchHostAddr, "", "")
}

// startBenchHostOn is startBenchHost with --path.sysfs=sysfs and the tree
// granted read-only on top of the manifest (as the harness grants its
// trees), unless sysfs is "".
func startBenchHostOn(name, addr, sysfs, tree string) (*benchExporter, error) {
	dir := filepath.Join(benchDir, name)
	plugins, run := filepath.Join(dir, "plugins"), filepath.Join(dir, "run")
	os.RemoveAll(dir)
	for _, d := range []string{benchDir, dir, plugins, run} {
		// 0755 whatever the umask: the host trusts plugins only in
		// directories nobody else can write.
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"plexporter-rdma", "plexporter-rdma.yaml"} {
		if err := os.Symlink(filepath.Join(pluginDir, f), filepath.Join(plugins, f)); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(dir, "plexporter.yml")
	cfg := "plugins:\n  rdma: {config: {optional_counters: false, qp_counters: false}}\n"
	args := []string{"--plugin.sandbox", "--plugin.dir=" + plugins, "--config.file=" + config, "--web.listen-address=" + addr,
		"--plugin.start-timeout=60s", "--plugin.runtime-dir=" + run, "--log.level=warn"}
	if sysfs != "" {
		cfg = fmt.Sprintf("plugins:\n  rdma: {config: {optional_counters: false, qp_counters: false}, manifest: {paths: {read_only: [%q]}}}\n", tree)
		args = append(args, "--path.sysfs="+sysfs)
	}
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return startBenchProc(name, "http://"+addr+"/metrics", "/usr/bin/plexporter", args...)
}

type benchPace struct {
	name  string
	every time.Duration
}

func parseBenchPaces(s string) ([]benchPace, error) {
	var ps []benchPace
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "0" || f == "back-to-back" {
			ps = append(ps, benchPace{"back-to-back", 0})
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 || d > time.Hour {
			return nil, fmt.Errorf("bad -bench.paces entry %q: want a duration in (0, 1h] or 0 for back to back", f)
		}
		name := d.String()
		if d%time.Second == 0 {
			name = fmt.Sprintf("%d s", d/time.Second)
		}
		ps = append(ps, benchPace{name, d})
	}
	return ps, nil
}

// benchBackToBack: the exporters alternate (the order rotates every run),
// each run scraping one of them until minRun has passed; per exporter the
// medians over the runs of CPU, the main process's CPU and wall time per
// scrape (the harness's compare and measureRun).
func benchBackToBack(es []*benchExporter, runs int, minRun time.Duration) ([][3]float64, error) {
	vals := make([][3][]float64, len(es))
	for run := range runs {
		for k := range es {
			i := (k + run) % len(es)
			e := es[i]
			cpu0, err := proctree.CPUSum(e.pids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			main0, _ := proctree.CPUSum(e.pids[:1])
			n, t0 := 0, time.Now()
			for {
				if _, _, err := benchGet(e.url, false); err != nil {
					return nil, fmt.Errorf("%s: %w", e.name, err)
				}
				n++
				if time.Since(t0) >= minRun {
					break
				}
			}
			wall := time.Since(t0).Seconds()
			cpu1, err := proctree.CPUSum(e.pids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			main1, _ := proctree.CPUSum(e.pids[:1])
			vals[i][0] = append(vals[i][0], (cpu1-cpu0)/float64(n))
			vals[i][1] = append(vals[i][1], (main1-main0)/float64(n))
			vals[i][2] = append(vals[i][2], wall/float64(n))
		}
	}
	out := make([][3]float64, len(es))
	for i := range es {
		for j := range 3 {
			out[i][j] = median(vals[i][j])
		}
	}
	return out, nil
}

type pacedSums struct {
	cpu, cpuMain, wall, period float64
	rounds                     int
}

func (c *pacedSums) perScrape() [3]float64 {
	if c.rounds == 0 {
		return [3]float64{}
	}
	n := float64(c.rounds)
	return [3]float64{c.cpu / n, c.cpuMain / n, c.wall / n}
}

// benchPaced is the harness's measurePaced: rounds start every `every`,
// the exporters' slots spread evenly over a round; a round's CPU of an
// exporter is its tree's from just before one of its scrapes to just
// before its next (rounds+1 scrapes make rounds rounds); means.
func benchPaced(es []*benchExporter, every time.Duration, rounds int) ([]*pacedSums, error) {
	n := len(es)
	cells := make([]*pacedSums, n)
	prev := make([][2]float64, n)
	last := make([]time.Time, n)
	wall := make([]time.Duration, n)
	for i := range cells {
		cells[i] = &pacedSums{}
	}
	start := time.Now()
	for round := range rounds + 1 {
		for i, e := range es {
			at := start.Add(time.Duration(round)*every + time.Duration(i)*every/time.Duration(n))
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			cpu, err := proctree.CPUSum(e.pids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			main, _ := proctree.CPUSum(e.pids[:1])
			now := time.Now()
			if round > 0 {
				c := cells[i]
				c.cpu += cpu - prev[i][0]
				c.cpuMain += main - prev[i][1]
				c.wall += wall[i].Seconds()
				c.period += now.Sub(last[i]).Seconds()
				c.rounds++
			}
			prev[i], last[i] = [2]float64{cpu, main}, now
			if round == rounds {
				continue
			}
			t0 := time.Now()
			if _, _, err := benchGet(e.url, false); err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			wall[i] = time.Since(t0)
		}
	}
	for _, c := range cells {
		if c.rounds > 0 {
			c.period /= float64(c.rounds)
		}
	}
	return cells, nil
}

// benchSeries counts the sample lines whose name starts with one of the
// prefixes (all sample lines when none is given).
func benchSeries(body string, prefixes ...string) int {
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if len(prefixes) == 0 {
			n++
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				n++
				break
			}
		}
	}
	return n
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchLine is the body's sample line that starts with prefix ("" if none).
func benchLine(body, prefix string) string {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// snapshotSysfs copies what the rdma plugin reads of the devices into
// snapshotRoot/sys on tmpfs (/run): class/infiniband/<dev> as the same
// relative symlink, and the directory it points to with every file's
// content (an unreadable one, such as an unpopulated gid_attrs entry, as
// an empty file, so that the directories list the same names) and every
// symlink inside as it is; power/ is left out.
func snapshotSysfs(devs []string) error {
	os.RemoveAll(snapshotRoot)
	for _, d := range devs {
		link := filepath.Join(ibClass, d)
		target, err := os.Readlink(link)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(snapshotRoot, ibClass), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, filepath.Join(snapshotRoot, link)); err != nil {
			return err
		}
		real := filepath.Clean(filepath.Join(ibClass, target))
		if err := copySysfsTree(real, filepath.Join(snapshotRoot, real)); err != nil {
			return err
		}
	}
	return nil
}

func copySysfsTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		s, t := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(s)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, t); err != nil {
				return err
			}
		case e.IsDir():
			if e.Name() == "power" {
				continue
			}
			if err := copySysfsTree(s, t); err != nil {
				return err
			}
		default:
			b, _ := os.ReadFile(s) // unreadable: an empty file of the same name
			if err := os.WriteFile(t, b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
