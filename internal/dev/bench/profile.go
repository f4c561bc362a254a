package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// goCmd runs the go tool in the repository root with a time bound and
// returns its combined output.
func (h *harness) goCmd(timeout time.Duration, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = h.root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 15))
	}
	return string(out), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// microBenchmarks runs the hot-path benchmarks (-count 5) and reports the
// median of each.
func (h *harness) microBenchmarks() error {
	type pkg struct{ path, bench, benchtime string }
	pkgs := []pkg{
		{"./sdk", "BenchmarkBatch/samples=100000", "10x"},
		{"./internal/guard", "BenchmarkMerge", "10x"},
		{"./host/internal/expose", "BenchmarkEncode100k", "5x"},
		{"./host/internal/expose", "BenchmarkHostPipeline/series=100000/plugins=1", "5x"},
	}
	type res struct {
		metrics map[string][]float64
		order   int
	}
	results := map[string]*res{}
	var names []string
	line := regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+(\d+)\s+(.*)$`)
	for _, p := range pkgs {
		out, err := h.goCmd(5*time.Minute, nil, "test", "-run", "^$", "-bench", p.bench, "-benchtime", p.benchtime, "-count", "5", "-benchmem", p.path)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(out, "\n") {
			m := line.FindStringSubmatch(strings.TrimSpace(l))
			if m == nil {
				continue
			}
			r := results[m[1]]
			if r == nil {
				r = &res{metrics: map[string][]float64{}, order: len(names)}
				results[m[1]] = r
				names = append(names, m[1])
			}
			f := strings.Fields(m[4])
			for i := 0; i+1 < len(f); i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if err == nil {
					r.metrics[f[i+1]] = append(r.metrics[f[i+1]], v)
				}
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no benchmark output")
	}
	var rows [][]string
	for _, n := range names {
		r := results[n]
		get := func(unit string, f func(float64) string) string {
			if v, ok := r.metrics[unit]; ok {
				return f(median(v))
			}
			return ""
		}
		rows = append(rows, []string{"`" + n + "`",
			get("ns/op", func(v float64) string { return fmtNum(v / 1e6) }),
			get("MB/s", fmtNum),
			get("bytes/op", func(v float64) string { return fmt.Sprintf("%.0f", v) }),
			get("B/op", func(v float64) string { return mib(v) }),
			get("allocs/op", func(v float64) string { return fmt.Sprintf("%.0f", v) }),
		})
		if n == "BenchmarkEncode100k/text" {
			if v, ok := r.metrics["MB/s"]; ok {
				h.report.atLeast("1", "text writer alone (`BenchmarkEncode100k/text`, batchtest mix) ≥ 250 MB/s", " MB/s", median(v), 250)
			}
		}
	}
	h.report.micro = "Medians of `-count 5`, in process, one goroutine; `BenchmarkMerge100k` and `BenchmarkEncode100k` use " +
		"`internal/testkit/batchtest.Mix` (100k samples), `BenchmarkMergeWorkload` and `BenchmarkHostPipeline` the harness workload " +
		"(100k series); `BenchmarkHostPipeline` is the host's CPU for one scrape without gRPC, HTTP and process " +
		"boundaries (decode + merge + encode [+ gzip]). Run them yourself with " +
		"`go test ./sdk ./internal/guard ./host/internal/expose -run '^$' -bench . -count 6 | benchstat -`.\n\n" +
		table([]string{"benchmark", "ms/op", "MB/s", "output bytes/op", "alloc MiB/op", "allocs/op"}, rows)
	return nil
}

// hostProfile runs the host inside `go test` (BenchmarkHostInProcess/<sub>)
// against the plugins in dir with config cfg and extra host args, and
// describes the profile.
func (h *harness) hostProfile(b *strings.Builder, label, dir, cfg, args, sub, benchtime string) error {
	prof := filepath.Join(h.work, "host-"+strings.ReplaceAll(label, " ", "-")+"-"+sub+".pprof")
	env := []string{"PERFHARNESS_PLUGIN_DIR=" + dir, "PERFHARNESS_CONFIG=" + cfg, "PERFHARNESS_ARGS=" + args}
	out, err := h.goCmd(5*time.Minute, env, "test", "-run", "^$", "-bench", "^BenchmarkHostInProcess$/^"+sub+"$",
		"-benchtime", benchtime, "-count", "1", "-cpuprofile", prof, "-o", filepath.Join(h.work, "host.test"), "./host")
	if err != nil {
		return err
	}
	title := fmt.Sprintf("Host side, %s, %s (the host inside `go test -bench 'HostInProcess/%s$' -benchtime %s`; the profile "+
		"includes the benchmark's HTTP client and the host's start)", label, sub, sub, benchtime)
	if l := benchLine(out); l != "" {
		title += "\n\n`" + l + "` (cpu-ms/op: the test process, i.e. host + client, without the plugin)"
	}
	return h.describeProfile(b, title, prof, hostStages, false)
}

// profiles CPU-profiles the scrapes whose targets were missed (all of them
// with -profile always): the 100k scrape on the plugin side (the bench
// plugin profiles itself) and on the host side (the host running inside
// `go test`, BenchmarkHostInProcess), and the rdma scrape (the rdma
// plugin's Collect in BenchmarkCollectSysfs on the scaled tree, and the host
// side of it).
func (h *harness) profiles() error {
	var b strings.Builder
	b.WriteString("Each profile: the steps of the work (cumulative time of a function and its callees; steps nest), " +
		"the areas (flat time of all functions, grouped by package), then the top functions " +
		"(`go tool pprof -top`; flat% is of all samples, cum% includes callees). Profiles are written and kept " +
		"in the harness's work directory with `-keep`.\n\n")
	var errs []string
	if h.profile == "always" || h.report.missed("1") {
		if err := h.profileExposition(&b); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if h.rdmaSys != "" && (h.profile == "always" || h.report.missed("2")) {
		if err := h.profileRDMA(&b); err != nil {
			errs = append(errs, err.Error())
		}
	}
	h.report.profile = b.String()
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (h *harness) profileExposition(b *strings.Builder) error {
	const n = 100000
	b.WriteString("### The 100k-series scrape (host + 1 bench plugin, configuration B)\n\n")
	// Plugin side. A sandboxed plugin runs as an unprivileged user and may
	// only write where its manifest lets it: grant it the profile directory.
	profDir := filepath.Join(h.work, "plugin-profile")
	if err := os.MkdirAll(profDir, 0o755); err != nil {
		return err
	}
	os.Chmod(profDir, 0o777)
	prof := filepath.Join(profDir, "plugin.pprof")
	e, err := h.startHost(hostSpec{
		name:    "profile-plugin",
		plugins: map[string]string{"bench": h.benchPluginBin()},
		config: fmt.Sprintf("  bench: {timeout: 60s, max_series: 100000000, config: {series: %d, cpu_profile: %q, profile_collects: 60}, manifest: {paths: {read_write: [%q]}}}\n",
			n, prof, profDir),
		args: []string{"--log.level=warn"},
	})
	if err != nil {
		return err
	}
	for range 61 {
		if _, _, err := h.get(e.url+e.path, fmtText.accept, false); err != nil {
			return err
		}
	}
	e.stop()
	if err := h.describeProfile(b, "Plugin side: the bench plugin process, 60 collects of 100k series", prof, pluginStages, false); err != nil {
		return err
	}
	// Host side.
	dir := filepath.Join(h.work, "profile-host-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(h.benchPluginBin(), filepath.Join(dir, "plexporter-bench")); err != nil {
		return err
	}
	cfg := filepath.Join(h.work, "profile-host.yml")
	body := fmt.Sprintf("plugins:\n  bench: {timeout: 60s, max_series: 100000000, config: {series: %d}}\n", n)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	for _, sub := range []string{"text", "text-gzip"} {
		if err := h.hostProfile(b, "100k series", dir, cfg, "", sub, "60x"); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) profileRDMA(b *strings.Builder) error {
	fmt.Fprintf(b, "### The rdma scrape (%d devices × %d ports)\n\n", rdmaDevices, rdmaPorts)
	prof := filepath.Join(h.work, "rdma.pprof")
	out, err := h.goCmd(5*time.Minute, []string{"PERFHARNESS_SYSFS=" + h.rdmaSys}, "test", "-run", "^$", "-bench", "^BenchmarkCollectSysfs$",
		"-benchtime", "200x", "-count", "1", "-cpuprofile", prof, "-o", filepath.Join(h.work, "rdma.test"), "./plugins/rdma")
	if err != nil {
		return err
	}
	title := "Plugin side: the rdma plugin's Collect in process (`go test ./plugins/rdma -bench CollectSysfs -benchtime 200x` on the scaled tree)"
	if l := benchLine(out); l != "" {
		title += "\n\n`" + l + "`"
	}
	if err := h.describeProfile(b, title, prof, rdmaStages, false); err != nil {
		return err
	}
	dir := filepath.Join(h.work, "profile-rdma-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(h.shippedPlugin("rdma"), filepath.Join(dir, "plexporter-rdma")); err != nil {
		return err
	}
	cfg := filepath.Join(h.work, "profile-rdma.yml")
	body := "plugins:\n  rdma: {config: {optional_counters: false, qp_counters: false}}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	return h.hostProfile(b, "rdma", dir, cfg, "--path.sysfs="+h.rdmaSys, "text", "300x")
}

func benchLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return ""
}

// areas maps function-name prefixes to an area of work; first match wins.
var areas = []struct{ prefix, area string }{
	{"runtime.mallocgc", "allocation"},
	{"runtime.(*mcache)", "allocation"},
	{"runtime.(*mcentral)", "allocation"},
	{"runtime.(*mheap)", "allocation"},
	{"runtime.nextFreeFast", "allocation"},
	{"runtime.memclrNoHeapPointers", "allocation"},
	{"runtime.growslice", "allocation"},
	{"runtime.makeslice", "allocation"},
	{"runtime.newobject", "allocation"},
	{"runtime.heapSetType", "allocation"},
	{"runtime.scanobject", "GC"},
	{"runtime.greyobject", "GC"},
	{"runtime.findObject", "GC"},
	{"runtime.gcDrain", "GC"},
	{"runtime.markBits", "GC"},
	{"runtime.(*gcWork)", "GC"},
	{"runtime.gc", "GC"},
	{"runtime.(*mspan)", "GC"},
	{"runtime.sweepone", "GC"},
	{"runtime.bgsweep", "GC"},
	{"runtime.wbBuf", "GC"},
	{"runtime.bulkBarrier", "GC"},
	{"runtime.typePointers", "GC"},
	{"runtime.(*unwinder)", "GC"},
	{"runtime.scanblock", "GC"},
	{"runtime.scanstack", "GC"},
	{"runtime.memmove", "memmove"},
	{"runtime.futex", "scheduler"},
	{"runtime.usleep", "scheduler"},
	{"runtime.netpoll", "scheduler"},
	{"runtime.epoll", "scheduler"},
	{"runtime.schedule", "scheduler"},
	{"runtime.findRunnable", "scheduler"},
	{"runtime.runqgrab", "scheduler"},
	{"runtime.lock", "scheduler"},
	{"runtime.unlock", "scheduler"},
	{"runtime.exitsyscall", "scheduler"},
	{"runtime.entersyscall", "scheduler"},
	{"runtime.reentersyscall", "scheduler"},
	{"runtime.casgstatus", "scheduler"},
	{"runtime.procyield", "scheduler"},
	{"runtime.", "runtime (other)"},
	{"internal/runtime/syscall", "syscalls"},
	{"internal/runtime/maps", "maps"},
	{"internal/runtime/atomic", "runtime (other)"},
	{"syscall.", "syscalls"},
	{"internal/poll.", "syscalls"},
	{"os.", "os (file handling)"},
	{"crypto/", "TLS (go-plugin AutoMTLS)"},
	{"vendor/golang.org/x/crypto", "TLS (go-plugin AutoMTLS)"},
	{"golang.org/x/crypto", "TLS (go-plugin AutoMTLS)"},
	{"google.golang.org/protobuf", "protobuf encode/decode"},
	{"google.golang.org/grpc", "gRPC"},
	{"golang.org/x/net/http2", "gRPC (http2)"},
	{"github.com/hashicorp/yamux", "yamux"},
	{"compress/", "gzip"},
	{"hash/crc32", "gzip"},
	{"net/http", "net/http"},
	{"bufio.", "net/http"},
	{"strconv.", "number formatting"},
	{"internal/strconv", "number formatting"},
	{"math.", "number formatting"},
	{"math/bits", "number formatting"},
	{"fmt.", "fmt"},
	{"gcWriteBarrier", "GC"},
	{"memeqbody", "strings/bytes"},
	{"cmpbody", "strings/bytes"},
	{"indexbytebody", "strings/bytes"},
	{"internal/sync", "sync"},
	{"sync.", "sync"},
	{"context.", "context"},
	{"io.", "os (file handling)"},
	{"internal/filepathlite", "os (file handling)"},
	{"path/filepath", "os (file handling)"},
	{"github.com/prometheus/procfs", "self-metrics (procfs)"},
	{"github.com/plexporter/plexporter/internal/guard", "merge (guard)"},
	{"github.com/plexporter/plexporter/host/internal/expose", "expose (text writer)"},
	{"github.com/plexporter/plexporter/internal/wire", "batch format (check, view, client_model)"},
	{"github.com/plexporter/plexporter/sdk", "sdk Writer"},
	{"github.com/plexporter/plexporter/internal/dev/bench", "bench plugin"},
	{"github.com/plexporter/plexporter/plugins/", "plugin code"},
	{"github.com/plexporter/plexporter/host", "host (other)"},
	{"github.com/prometheus", "client_golang/expfmt"},
	{"github.com/hashicorp", "go-plugin"},
	{"expandAVX512", "GC"},
	{"internal/runtime/gc", "GC"},
	{"net/textproto", "net/http"},
	{"hash/maphash", "merge (guard)"},
	{"unicode/utf8", "merge (guard)"},
	{"internal/bytealg", "strings/bytes"},
	{"strings.", "strings/bytes"},
	{"bytes.", "strings/bytes"},
	{"sort.", "sort"},
	{"slices.", "sort"},
	{"aeshashbody", "maps"},
}

func areaOf(fn string) string {
	for _, a := range areas {
		if strings.HasPrefix(fn, a.prefix) {
			return a.area
		}
	}
	return "other"
}

// stage is a function whose cumulative time (callees included) is one step
// of the work; the step's share of the profile is its cum%.
type stage struct{ label, fn string }

const (
	pkgHost = "github.com/plexporter/plexporter/host/internal/"
	pkgProm = "github.com/prometheus/client_golang/prometheus."
	pkgGRPC = "google.golang.org/grpc/internal/transport."
)

var (
	hostStages = []stage{
		{"plugin start (before the scrapes: handshake, TLS, Info, Configure)", pkgHost + "supervise.(*Supervisor).start"},
		{"HTTP connections of the host (request parsing + handler)", "net/http.(*conn).serve"},
		{"HTTP handler (everything below but the reader goroutine and the collectors' goroutines)", pkgHost + "web.(*metricsHandler).ServeHTTP"},
		{"scrape: fan-out, wait, merge, self-metrics", pkgHost + "scrape.(*Scraper).Scrape"},
		{"plugin stream receive loop (Recv: decode)", pkgHost + "supervise.(*Supervisor).collect"},
		{"gRPC transport reader goroutine (TLS decrypt, HTTP/2 frames)", pkgGRPC + "(*http2Client).reader"},
		{"merge (guard)", pkgHost + "guard.Merge"},
		{"self-metrics (Gather, Writer, merge)", pkgHost + "scrape.(*Scraper).hostFamilies"},
		{"self-metrics: the process collector (own goroutine in Gather)", pkgProm + "(*processCollector).Collect"},
		{"self-metrics: the Go collector (own goroutine in Gather)", pkgProm + "(*goCollector).Collect"},
		{"encode (expose.Write; includes gzip and socket writes)", pkgHost + "expose.Write"},
		{"gzip (compress/flate)", "compress/flate.(*compressor).write"},
		{"socket writes of the response", "net/http.(*chunkWriter).Write"},
		{"GC (background mark workers)", "runtime.gcBgMarkWorker"},
		{"scheduler (idle Ps looking for work)", "runtime.findRunnable"},
		{"the benchmark's HTTP client (not the host)", "net/http.(*persistConn).readLoop"},
	}
	pluginStages = []stage{
		{"Collect RPC handler (SDK: Writer, sends)", "github.com/plexporter/plexporter/sdk.(*server).Collect"},
		{"the plugin's Collect (workload.Plan.Write into the Writer, sends of full batches)", "main.(*plugin).Collect"},
		{"stream.Send (proto marshal, HTTP/2 framing)", "google.golang.org/grpc.(*serverStream).SendMsg"},
		{"proto marshal", "google.golang.org/protobuf/internal/impl.(*MessageInfo).marshal"},
		{"gRPC transport writer goroutine (TLS encrypt, socket writes)", pkgGRPC + "(*loopyWriter).run"},
		{"GC (background mark workers)", "runtime.gcBgMarkWorker"},
	}
	rdmaStages = []stage{
		{"sysfs pass (all devices)", "github.com/plexporter/plexporter/plugins/rdma.(*sysfsReader).devices.func1"},
		{"counter files (readCounters)", "github.com/plexporter/plexporter/plugins/rdma.(*sysfsReader).readCounters"},
		{"one attribute read (sysfs.Buffer.Read: open, read, close into a reused buffer)", "github.com/plexporter/plexporter/plugins/internal/sysfs.(*Buffer).Read"},
		{"os.Open (openat + fcntl O_NONBLOCK + poller registration)", "os.OpenFile"},
		{"… of which syscall.SetNonblock (fcntl)", "syscall.SetNonblock"},
		{"(*os.File).Read (io.ReadFull: 2 reads, the second one for EOF)", "os.(*File).Read"},
		{"(*os.File).Close", "os.(*File).Close"},
		{"os.ReadDir (directory listings)", "os.ReadDir"},
		{"allocation (mallocgc)", "runtime.mallocgc"},
		{"GC (background mark workers)", "runtime.gcBgMarkWorker"},
		{"writing the samples (sdk Writer)", "github.com/plexporter/plexporter/plugins/rdma.(*plugin).writeDevice"},
	}
)

// describeProfile writes the stages' and areas' shares and the top functions
// of prof (by flat time, or by cumulative time when cum is set).
func (h *harness) describeProfile(b *strings.Builder, title, prof string, stages []stage, cum bool) error {
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		return fmt.Errorf("profile %s missing or empty", prof)
	}
	out, err := h.goCmd(2*time.Minute, nil, "tool", "pprof", "-top", "-nodecount=100000", prof)
	if err != nil {
		return err
	}
	var header []string
	type fn struct {
		name            string
		flatPct, cumPct float64
		line            string
	}
	var fns []fn
	inTable := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "flat%") && strings.Contains(l, "cum%") {
			inTable = true
			continue
		}
		if !inTable {
			if strings.HasPrefix(l, "Duration:") || strings.HasPrefix(l, "Showing nodes") {
				header = append(header, strings.TrimSpace(l))
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		flatPct, err1 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		cumPct, err2 := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		fns = append(fns, fn{name: strings.Join(f[5:], " "), flatPct: flatPct, cumPct: cumPct, line: l})
	}
	if len(fns) == 0 {
		return fmt.Errorf("pprof: no functions in %s", prof)
	}
	byArea := map[string]float64{}
	for _, f := range fns {
		byArea[areaOf(f.name)] += f.flatPct
	}
	type kv struct {
		k string
		v float64
	}
	var as []kv
	for k, v := range byArea {
		as = append(as, kv{k, v})
	}
	sort.Slice(as, func(i, j int) bool { return as[i].v > as[j].v })
	fmt.Fprintf(b, "#### %s\n\n", title)
	if h.verbose {
		var other []string
		for _, f := range fns {
			if areaOf(f.name) == "other" && f.flatPct > 0 {
				other = append(other, f.name)
			}
		}
		h.debugf("profile %s: functions in area other: %s", filepath.Base(prof), strings.Join(other, ", "))
	}
	if len(header) > 0 {
		fmt.Fprintf(b, "%s\n\n", strings.Join(header, "; "))
	}
	var rows [][]string
	cumOf := map[string]float64{}
	for _, f := range fns {
		cumOf[strings.TrimSuffix(f.name, " (inline)")] = f.cumPct
	}
	for _, st := range stages {
		if v, ok := cumOf[st.fn]; ok {
			rows = append(rows, []string{st.label, fmt.Sprintf("%.1f%%", v), "`" + strings.TrimPrefix(strings.TrimPrefix(st.fn, pkgHost), "github.com/plexporter/plexporter/") + "`"})
		}
	}
	if len(rows) > 0 {
		b.WriteString("Steps (cumulative time of the function, callees included; steps nest):\n\n")
		b.WriteString(table([]string{"step", "cum", "function"}, rows))
		b.WriteString("\n")
	}
	rows = nil
	for _, a := range as {
		if a.v < 0.5 {
			continue
		}
		rows = append(rows, []string{a.k, fmt.Sprintf("%.1f%%", a.v)})
	}
	b.WriteString("Areas (flat time by package):\n\n")
	b.WriteString(table([]string{"area (flat)", "share"}, rows))
	list := fns
	if cum {
		list = append([]fn(nil), fns...)
		sort.SliceStable(list, func(i, j int) bool { return list[i].cumPct > list[j].cumPct })
		b.WriteString("\nTop functions by cumulative time:\n")
	}
	b.WriteString("\n```\n")
	b.WriteString("      flat  flat%   sum%        cum   cum%\n")
	for i, f := range list {
		if i == 25 {
			break
		}
		b.WriteString(f.line + "\n")
	}
	b.WriteString("```\n\n")
	return nil
}
