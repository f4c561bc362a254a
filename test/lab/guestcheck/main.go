// Command guestcheck runs inside the real-kernel lab's QEMU guest
// (test/lab/README.md) once guest.sh has installed the project's packages,
// started the installed plexporter host and made the kernel objects the
// plugins report on: rxe0 on the virtio NIC, the QEMU NVMe controller, NFS
// v4.2 and v3 loopback mounts, the virtio_net and e1000e NICs. It scrapes
// the host, makes traffic with the kernel's own tools, scrapes again and
// compares what the plugins exported with what the kernel and its tools say.
//
// Its output is TAP: one "ok N - name" or "not ok N - name" per check, the
// reasons as "#" lines, and a last "# N passed, N failed" line, which
// test/lab/run.sh reads from the 9p share after the guest powers off.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// check is one pass/fail line of the summary. run returns why it failed;
// notes are printed either way (what was compared, what the kernel lacks).
type check struct {
	name string
	run  func(l *lab) error
	// knownBug marks a check that fails because of a reported, not yet
	// fixed bug: TAP's "not ok ... # TODO", not counted as failed. When it
	// passes, the mark is stale and that is a failure.
	knownBug string
}

// lab is what every check shares: the scraper and the guest's layout, which
// guest.sh made.
type lab struct {
	s       *scraper
	plugins []string
	notes   []string
	// the scrapes around reclaim/drop-dentries
	reclaimBefore, reclaimAfter exposition
}

func (l *lab) note(format string, args ...any) {
	l.notes = append(l.notes, fmt.Sprintf(format, args...))
}

func main() {
	url := flag.String("url", "http://127.0.0.1:9880/metrics", "the installed host's metrics endpoint")
	plugins := flag.String("plugins", "", "comma-separated plugins that were installed (each must be up and sandboxed)")
	only := flag.String("run", "", "comma-separated check name prefixes to run (default: all)")
	ready := flag.Duration("ready-timeout", 180*time.Second, "how long to wait for every installed plugin to be up")
	out := flag.String("out", "", "also write the TAP output to this file (with -bench: the report)")
	rxe := flag.Int("rxe", 4, "rxe devices guest.sh made (rxe0 on eth0, the others on dummy netdevs)")
	bench := flag.Bool("bench", false, "instead of the checks: measure the rdma plugin against node_exporter on the rxe devices (make lab-bench)")
	var bo benchOptions
	flag.IntVar(&bo.runs, "bench.runs", 5, "back to back: runs per exporter (medians reported)")
	flag.DurationVar(&bo.minRun, "bench.min-run", time.Second, "back to back: minimum duration of one run")
	flag.IntVar(&bo.scrapes, "bench.scrapes", 20, "rounds at each timed pace under 10 s")
	flag.IntVar(&bo.scrapesSlow, "bench.scrapes-slow", 6, "rounds at each pace of 10 s or more")
	flag.StringVar(&bo.paces, "bench.paces", "0,1s,15s", "paces: 0 is back to back, else one scrape of each exporter per duration; the slowest is the headline")
	flag.Parse()
	if *bench {
		if err := runBench(bo, *out); err != nil {
			fmt.Fprintln(os.Stderr, "guestcheck -bench:", err)
			os.Exit(1)
		}
		return
	}

	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "guestcheck:", err)
			os.Exit(2)
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	l := &lab{s: newScraper(*url), plugins: strings.Split(*plugins, ",")}
	checks := selected(append(allChecks(*ready, *rxe), reclaimChecks(l.plugins)...), *only)
	fmt.Fprintf(w, "1..%d\n", len(checks))
	passed, failed, skips, known := 0, 0, 0, 0
	var failedNames []string
	for i, c := range checks {
		l.notes = nil
		start := time.Now()
		err := c.run(l)
		took := time.Since(start).Round(100 * time.Millisecond)
		var skip skipped
		switch {
		case c.knownBug != "" && err != nil:
			known++
			fmt.Fprintf(w, "not ok %d - %s # TODO %s\n", i+1, c.name, c.knownBug)
			for _, line := range strings.Split(err.Error(), "\n") {
				fmt.Fprintf(w, "#   %s\n", line)
			}
		case c.knownBug != "":
			failed++
			failedNames = append(failedNames, c.name)
			fmt.Fprintf(w, "not ok %d - %s (passes, but is marked as the known bug %q: remove the mark)\n", i+1, c.name, c.knownBug)
		case err == nil:
			passed++
			fmt.Fprintf(w, "ok %d - %s (%s)\n", i+1, c.name, took)
		case errors.As(err, &skip):
			skips++
			fmt.Fprintf(w, "ok %d - %s # SKIP %s\n", i+1, c.name, skip.reason)
		default:
			failed++
			failedNames = append(failedNames, c.name)
			fmt.Fprintf(w, "not ok %d - %s (%s)\n", i+1, c.name, took)
			for _, line := range strings.Split(err.Error(), "\n") {
				fmt.Fprintf(w, "#   %s\n", line)
			}
		}
		for _, n := range l.notes {
			fmt.Fprintf(w, "#   note: %s\n", n)
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "# failed: %s\n", strings.Join(failedNames, " "))
	}
	if known > 0 {
		fmt.Fprintf(w, "# %d known bugs (TODO, not counted)\n", known)
	}
	if skips > 0 {
		fmt.Fprintf(w, "# %d skipped (counted as passed)\n", skips)
	}
	fmt.Fprintf(w, "# %d passed, %d failed\n", passed+skips, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// skipped is a check that does not apply to this kernel; TAP's "# SKIP".
type skipped struct{ reason string }

func (s skipped) Error() string { return "skipped: " + s.reason }

func errSkip(reason string) error { return skipped{reason} }

func allChecks(ready time.Duration, rxe int) []check {
	return []check{
		{name: "host/plugins-up-sandboxed", run: func(l *lab) error { return checkPluginsUp(l, ready) }},
		{name: "host/plugin-identity", run: checkPluginIdentity},
		{name: "sandbox/procfs-grants-held", run: checkProcfsGrantsHeld},
		{name: "rdma/port-info", run: checkRDMAPortInfo},
		{name: "rdma/hw-counters", run: checkRDMAHWCounters},
		{name: "rdma/rxe-devices", run: func(l *lab) error { return checkRDMADevices(l, rxe) }},
		{name: "rdma/optional-counters-netlink", run: checkRDMAOptional},
		{name: "rdma/rping-traffic", run: checkRDMATraffic},
		{name: "attribution/rdma-qp-owner", run: checkAttributionQPOwner}, {name: "attribution/cgroup-jobs-uverbs", run: checkAttributionCgroupJobs},
		{name: "nvme/info", run: checkNVMeInfo},
		{name: "nvme/smart-equals-nvme-cli", run: checkNVMeSMART},
		{name: "nfs/mounts", run: checkNFSMounts},
		{name: "nfs/per-op", run: checkNFSPerOp},
		{name: "nfs/per-xprt-nconnect", run: checkNFSXprt},
		{name: "nfs/socket-state", run: checkNFSSockets},
		{name: "nfs/bytes-after-io", run: checkNFSBytes},
		{name: "ethtool/virtio_net-driver-stats", run: func(l *lab) error { return checkDriverStats(l, "eth0", "virtio_net") }},
		{name: "ethtool/e1000e-driver-stats", run: func(l *lab) error { return checkDriverStats(l, "eth1", "e1000e") }},
		{name: "ethtool/standard-stats", run: checkStandardStats},
		{name: "ebpf/attach", run: checkEBPFAttach},
		{name: "ebpf/memory-returned", run: checkEBPFMemory},
		{name: "ebpf/disk-io", run: checkEBPFDisk},
		{name: "ebpf/tcp-connections", run: checkEBPFConnections},
		{name: "ebpf/nfs-latency", run: checkEBPFNFSLatency},
		{name: "ebpf/tcp-connections-kprobe", run: checkEBPFKprobeConnections},
		{name: "rdma/device-readded", run: checkRDMADeviceReadded},
		{name: "limits/pids", run: checkLimitsPids},
		{name: "limits/memory-shm", run: checkLimitsMemoryShm},
		{name: "limits/cpu", run: checkLimitsCPU},
		{name: "limits/cpu-demotion", run: checkLimitsCPUDemotion},
		{name: "limits/no-warning", run: checkLimitsNoWarning},
		// Last: a dentry reclaim broke procfs reads through Landlock rules
		// for the rest of the run (README Findings 2, fixed in the
		// launcher); should it come back, no other check depends on it.
		{name: "nfs/after-dentry-reclaim", run: checkNFSAfterReclaim},
	}
}

// knownBugs are the reclaim/<plugin> checks that fail for a reported bug
// (test/lab/README.md, Findings).
var knownBugs = map[string]string{}

// reclaimChecks: one dentry-cache reclaim, then one check per installed
// plugin that it reported no new partial error.
func reclaimChecks(plugins []string) []check {
	checks := []check{{name: "reclaim/drop-dentries", run: dropDentries}}
	for _, p := range plugins {
		checks = append(checks, check{name: "reclaim/" + p, run: func(l *lab) error { return checkAfterReclaim(l, p) }, knownBug: knownBugs[p]})
	}
	return checks
}

func selected(all []check, only string) []check {
	if only == "" {
		return all
	}
	var out []check
	for _, c := range all {
		for _, p := range strings.Split(only, ",") {
			if strings.HasPrefix(c.name, p) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
