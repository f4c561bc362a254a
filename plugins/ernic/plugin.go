package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// plugin exports rocm-ernic's run directory under ernic-exporter's names.
type plugin struct {
	runDir string
	proc   procfs
	getenv func(string) string // os.Getenv; tests replace it
	now    func() time.Time    // time.Now; tests replace it

	mu    sync.Mutex // one collect at a time: the keeper and watch are shared state
	keep  *keeper
	watch *serverWatch
	errs  sdk.CollectionErrors // ernic_collection_errors_total
}

func newPlugin() *plugin {
	return &plugin{getenv: os.Getenv, now: time.Now, keep: newKeeper(), watch: newServerWatch()}
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{
		Name:    "ernic",
		Version: sdk.BuildVersion(),
		Metrics: catalogue,
		Sandbox: sdk.SandboxHints{ReadOnlyPaths: []string{defaultRunDir, defaultEnv, "/proc"}},
	}
}

func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	c := defaultConfig()
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	dir, from, err := resolveRunDir(c, cfg.Paths.Rootfs, p.getenv)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		// Not an error: rocm-ernic creates it when its first server starts.
		cfg.Warn("run directory %s (from %s): %v; exporting ernic_instances 0 until it appears", dir, from, err)
	}
	p.runDir, p.proc = dir, procfs{root: cfg.Paths.Procfs}
	return nil
}

func (p *plugin) Collect(ctx context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.writeErrors(w)

	insts := p.readManifest(w)
	files, orphans := p.statsFiles(w, insts)
	w.Gauge(descOrphanStats, float64(orphans))
	w.Gauge(descInstances, float64(len(insts)))
	vms := 0
	for _, in := range insts {
		if in.VM != nil && in.VM.Attached {
			vms++
		}
	}
	w.Gauge(descVMs, float64(vms))

	clock := &nodeClock{proc: p.proc, now: p.now(), fail: func(err error) { p.errs.Fail(w, collectorProcfs, err) }}
	ids := map[string]bool{}
	for _, in := range insts {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ids[in.ID] {
			// Two entries would write the same series twice, which no
			// exposition may hold: the first entry wins.
			p.errs.Fail(w, collectorManifest, fmt.Errorf("%s: instance id %s is listed twice; the later entry is ignored", filepath.Join(p.runDir, manifestFile), in.ID))
			continue
		}
		ids[in.ID] = true
		file, ok := files[in.num]
		if !in.isID || !ok {
			file = ""
		}
		p.collectInstance(ctx, w, in, file, clock)
	}
	p.keep.sweep()
	p.watch.forget(ids)
	return nil
}

// maxManifestSize bounds instances.json (about 400 bytes per instance).
const maxManifestSize = 4 << 20

// collectInstance writes one instance's series: liveness and the manifest's
// from procfs and the entry, the statistics from file ("" when it has none:
// only the manifest's series, as in ernic-exporter).
func (p *plugin) collectInstance(ctx context.Context, w *sdk.Writer, in instance, file string, clock *nodeClock) {
	var mtime time.Time
	if file != "" {
		if fi, err := os.Stat(file); err == nil {
			mtime = fi.ModTime()
		}
	}
	proc, err := p.proc.lookup(in.PID)
	if err != nil {
		p.errs.Fail(w, collectorProcfs, fmt.Errorf("instance %s pid %d: %w", in.ID, in.PID, err))
	}
	proc, inc := p.watch.check(in.ID, in.PID, proc, mtime, clock.startEpoch)
	p.writeInstance(w, in, proc, clock)
	if file == "" {
		return
	}
	s, trusted, err := readStable(ctx, file)
	if err != nil {
		p.errs.Fail(w, collectorStats, err)
		return
	}
	s, torn := p.keep.accept(in.ID, inc, s, trusted)
	w.Counter(descTornReads, torn, in.ID, in.Role)
	if s != nil {
		writeStats(w, in, s)
	}
}

// readManifest returns the instances of instances.json. A missing file is
// no instance (rocm-ernic is not running); a file that is not valid JSON
// is read once more (the launcher may be rewriting it) and then reported
// and treated as no instance, as ernic-exporter does.
func (p *plugin) readManifest(w *sdk.Writer) []instance {
	path := filepath.Join(p.runDir, manifestFile)
	var err error
	for attempt := range 2 {
		if attempt > 0 {
			time.Sleep(rereadDelay)
		}
		var data []byte
		data, err = readCapped(path, maxManifestSize)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			break
		}
		var insts []instance
		if insts, err = parseManifest(data); err == nil {
			return insts
		}
		err = fmt.Errorf("%s: %w", path, err)
	}
	p.errs.Fail(w, collectorManifest, err)
	return nil
}

// statsFiles maps instance ids to their statistics files and counts the
// orphans: <stem>.stats files whose stem Python's int() reads as an id
// that the manifest does not list. Other *.stats names are skipped, as in
// ernic-exporter. When two names give one id ("1.stats", "01.stats"), the
// canonical one wins, else the first in name order.
func (p *plugin) statsFiles(w *sdk.Writer, insts []instance) (map[int64]string, int) {
	ents, err := os.ReadDir(p.runDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			p.errs.Fail(w, collectorStats, err)
		}
		return nil, 0
	}
	listed := map[int64]bool{}
	for _, in := range insts {
		if in.isID {
			listed[in.num] = true
		}
	}
	files := map[int64]string{}
	orphanIDs := map[int64]bool{}
	for _, e := range ents { // name order
		name := e.Name()
		stem, ok := strings.CutSuffix(name, ".stats")
		if !ok || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		id, err := parsePythonInt(stem)
		if err != nil {
			continue
		}
		if !listed[id] {
			orphanIDs[id] = true
			continue
		}
		if _, dup := files[id]; !dup || name == strconv.FormatInt(id, 10)+".stats" {
			files[id] = filepath.Join(p.runDir, name)
		}
	}
	return files, len(orphanIDs)
}

// writeInstance writes the manifest- and procfs-derived series of one
// instance.
// Uptimes are the node's uptime minus the process's start (both since
// boot), as ernic-exporter computes them.
func (p *plugin) writeInstance(w *sdk.Writer, in instance, proc process, clock *nodeClock) {
	up := 0.0
	if proc.state == procAlive {
		up = 1
	}
	w.Gauge(descInstanceUp, up, in.ID, in.Role, in.MAC)
	if proc.state == procAlive && proc.startTick != 0 {
		if u := clock.uptime(); u > 0 {
			w.Gauge(descInstanceUptime, max(0, u-float64(proc.startTick)/userHZ), in.ID, in.Role)
		}
	}
	attached := in.VM != nil && in.VM.Attached
	if !attached {
		w.Gauge(descVMAttached, 0, in.ID, in.Role, "")
		return
	}
	vm := in.VM
	w.Gauge(descVMAttached, 1, in.ID, in.Role, vm.Name)
	gpu := 0.0
	if vm.GPU != "" {
		gpu = 1
	}
	w.Gauge(descVMGPUPassthrough, gpu, in.ID, in.Role)
	if vm.LaunchedAt > 0 {
		w.Gauge(descVMUptime, max(0, clock.epoch()-vm.LaunchedAt), in.ID, in.Role)
		return
	}
	if vp, err := p.proc.lookup(vm.PID); err == nil && vp.state == procAlive && vp.startTick != 0 {
		if u := clock.uptime(); u > 0 {
			w.Gauge(descVMUptime, max(0, u-float64(vp.startTick)/userHZ), in.ID, in.Role)
		}
	}
}

// writeStats writes the statistics-file series of one instance.
func writeStats(w *sdk.Writer, in instance, s *stats) {
	for _, c := range instanceCounters {
		w.Counter(c.desc, s.get(c.key).counter(), in.ID, in.Role)
	}
	w.Counter(descRDMABytes, sum(s, rdmaByteKeys), in.ID, in.Role)
	w.Counter(descIPBytes, sum(s, ipByteKeys), in.ID, in.Role)

	state := "unknown"
	if v, ok := s.values[keyConnection]; ok {
		state = v.text
	}
	conn := 0.0
	if strings.HasPrefix(state, "connected") {
		conn = 1
	}
	w.Gauge(descConnectionUp, conn, in.ID, in.Role, state)

	w.Gauge(descQPCount, float64(len(s.qps)), in.ID, in.Role)
	for _, q := range s.qps {
		for _, c := range qpCounters {
			w.Counter(c.desc, q.values[c.key].counter(), in.ID, in.Role, q.handle)
		}
	}
	for _, l := range s.lif {
		w.Counter(descLIFCounter, l.v.counter(), in.ID, in.Role, l.name)
	}
}

// sum adds the integer values of keys exactly (non-integers and negatives
// count 0, as each counter does) and rounds the total once.
func sum(s *stats, keys []string) float64 {
	total := new(big.Int)
	for _, k := range keys {
		if n := s.get(k).n; n != nil && n.Sign() > 0 {
			total.Add(total, n)
		}
	}
	return bigToFloat(total)
}

func (p *plugin) writeErrors(w *sdk.Writer) {
	p.errs.Write(w, descCollectionErrors, errorCollectors...)
}
