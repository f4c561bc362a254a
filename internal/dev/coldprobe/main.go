// Command coldprobe measures the CPU of plexporter hosts per scrape at a
// pace, several builds side by side on one schedule, so that two builds are
// compared in the same minutes of the same machine (docs/performance.md,
// "The fixed cost of a scrape at Prometheus's pace").
//
// Each argument starts one host: label=host-binary:plugin-name:plugin-binary:plugin-yaml,
// e.g.
//
//	go run ./internal/dev/coldprobe -pace 3s -rounds 30 \
//	  'old_1=/tmp/old/plexporter:bench:bin/bench/plexporter-bench:{config: {series: 10}}' \
//	  'new_1=bin/plexporter:bench:bin/bench/plexporter-bench:{config: {series: 10}}' \
//	  'old_2=...' 'new_2=...'
//
// The plugin is installed with its manifest (plugin-binary.yaml) when there
// is one, so it runs in its sandbox as the harness runs it; plugin-name
// "none" with a missing binary starts a host without plugins. The hosts are
// scraped in turn, spread evenly over each period of -pace (0: back to
// back), over kept-alive connections without compression (as the harness
// scrapes). A host's CPU per scrape is its CPU clock (and its plugin
// processes', read apart) from just before one of its scrapes to just
// before its next; labels sharing the part before "_" are a group, whose
// figures are over all its hosts' rounds (put the builds compared in
// alternating slots: a slot's place in the period moves its figures).
// Context switches are the host's threads' voluntary and involuntary ones.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plexporter/plexporter/internal/dev/proctree"
)

// cpuMS is a process's CPU clock in ms; 0 when it has exited.
func cpuMS(pid int) float64 {
	s, err := proctree.CPU(pid)
	if err != nil {
		return 0
	}
	return s * 1e3
}

// switches is the number of context switches of pid's threads.
func switches(pid int) float64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	n := 0.0
	for _, t := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				n += f
			}
		}
	}
	return n
}

type host struct {
	label, url string
	cmd        *exec.Cmd
	plugins    []int
	// per round: host CPU, plugin CPU (ms), host context switches
	host, plugin, switches []float64
	lastH, lastP, lastS    float64
}

func (h *host) sample(keep bool) {
	p := 0.0
	for _, k := range h.plugins {
		p += cpuMS(k)
	}
	c, s := cpuMS(h.cmd.Process.Pid), switches(h.cmd.Process.Pid)
	if keep {
		h.host = append(h.host, c-h.lastH)
		h.plugin = append(h.plugin, p-h.lastP)
		h.switches = append(h.switches, s-h.lastS)
	}
	h.lastH, h.lastP, h.lastS = c, p, s
}

func start(work string, i int, spec, extra string) (*host, error) {
	label, rest, ok := strings.Cut(spec, "=")
	parts := strings.SplitN(rest, ":", 4)
	if !ok || len(parts) != 4 {
		return nil, fmt.Errorf("%q: want label=host-binary:plugin-name:plugin-binary:plugin-yaml", spec)
	}
	bin, name, plugin, cfg := parts[0], parts[1], parts[2], parts[3]
	dir := filepath.Join(work, fmt.Sprintf("%d-plugins", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(plugin); err == nil {
		if err := os.Symlink(plugin, filepath.Join(dir, "plexporter-"+name)); err != nil {
			return nil, err
		}
		if _, err := os.Stat(plugin + ".yaml"); err == nil {
			if err := os.Symlink(plugin+".yaml", filepath.Join(dir, "plexporter-"+name+".yaml")); err != nil {
				return nil, err
			}
		}
	}
	config := filepath.Join(work, fmt.Sprintf("%d.yml", i))
	if err := os.WriteFile(config, []byte("plugins:\n  "+name+": "+cfg+"\n"), 0o644); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := append([]string{"--plugin.dir=" + dir, "--config.file=" + config, "--web.listen-address=" + addr, "--log.level=warn"}, strings.Fields(extra)...)
	logf, err := os.Create(filepath.Join(work, fmt.Sprintf("%d.log", i)))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &host{label: label, cmd: cmd, url: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, err := http.Get(h.url + "/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return h, fmt.Errorf("%s: not ready after 60 s (log: %s)", label, logf.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.plugins = proctree.Descendants(cmd.Process.Pid)
	return h, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func mean(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func main() {
	pace := flag.Duration("pace", 3*time.Second, "one scrape of each host per pace (0: back to back)")
	rounds := flag.Int("rounds", 30, "rounds measured (one scrape of each host), after a round of warm-up")
	work := flag.String("work", "", "work directory (plugin directories, configs, host logs; default: a temporary one, removed)")
	extra := flag.String("args", "", "more host flags, space-separated (e.g. --path.sysfs=<tree>/sys)")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("no hosts: label=host-binary:plugin-name:plugin-binary:plugin-yaml ...")
	}
	if *work == "" {
		d, err := os.MkdirTemp("", "coldprobe-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*work = d
	}
	var hosts []*host
	stop := func() {
		for _, h := range hosts {
			_ = h.cmd.Process.Signal(syscall.SIGTERM)
			_ = h.cmd.Wait()
		}
	}
	defer stop()
	for i, spec := range flag.Args() {
		h, err := start(*work, i, spec, *extra)
		if h != nil {
			hosts = append(hosts, h)
		}
		if err != nil {
			stop()
			log.Fatal(err)
		}
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
	get := func(h *host) {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		r, err := client.Do(req)
		if err != nil {
			log.Printf("%s: %v", h.label, err)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	for _, h := range hosts { // warm-up: the plugins' first collects
		get(h)
		get(h)
	}
	t0 := time.Now().Add(*pace)
	n := time.Duration(len(hosts))
	for round := 0; round <= *rounds; round++ {
		for i, h := range hosts {
			time.Sleep(time.Until(t0.Add(time.Duration(round)**pace + time.Duration(i)**pace/n)))
			h.sample(round > 0)
			get(h)
		}
	}
	type group struct{ host, plugin, switches []float64 }
	groups := map[string]*group{}
	var order []string
	for _, h := range hosts {
		fmt.Printf("%-10s host %.3f ms (median %.3f), plugin %.3f ms (median %.3f), host context switches %.1f per scrape\n",
			h.label, mean(h.host), median(h.host), mean(h.plugin), median(h.plugin), mean(h.switches))
		name, _, _ := strings.Cut(h.label, "_")
		g := groups[name]
		if g == nil {
			g = &group{}
			groups[name] = g
			order = append(order, name)
		}
		g.host, g.plugin, g.switches = append(g.host, h.host...), append(g.plugin, h.plugin...), append(g.switches, h.switches...)
	}
	for _, name := range order {
		g := groups[name]
		fmt.Printf("group %-8s %d rounds: host %.3f ms (median %.3f), plugin %.3f ms (median %.3f), host+plugin %.3f ms, host context switches %.1f per scrape\n",
			name, len(g.host), mean(g.host), median(g.host), mean(g.plugin), median(g.plugin), mean(g.host)+mean(g.plugin), mean(g.switches))
	}
}
