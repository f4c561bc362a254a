// Command benchplugin is the performance harness's plugin (never shipped): it
// writes its shard of the synthetic workload (package workload) on every
// Collect. Like the chaos plugin it takes its name from its file name, so one
// binary serves as bench1..bench6. Optionally it profiles its own CPU for a
// number of collects.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
	"github.com/plexporter/plexporter/sdk"
)

type config struct {
	Series int `json:"series"` // series of the whole workload
	Shard  int `json:"shard"`  // this plugin's shard, 0-based
	Shards int `json:"shards"` // number of plugins sharing the series
	// CPUProfile, if set, is written after ProfileCollects collects.
	CPUProfile      string `json:"cpu_profile"`
	ProfileCollects int    `json:"profile_collects"`
}

type plugin struct {
	name string

	mu       sync.Mutex
	plan     *workload.Plan
	cfg      config
	collects int
	prof     *os.File
}

func (p *plugin) Info() sdk.Info {
	var descs []*sdk.Desc
	for _, f := range workload.Families() {
		descs = append(descs, f.Desc)
	}
	return sdk.Info{Name: p.name, Version: "0.0.1-bench", Metrics: descs}
}

func (p *plugin) Configure(_ context.Context, cfg sdk.Config) error {
	var c config
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	if c.Shards > 1 && (c.Shard < 0 || c.Shard >= c.Shards) {
		return fmt.Errorf("shard %d out of range for %d shards", c.Shard, c.Shards)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = c
	p.plan = workload.NewPlan(c.Series, c.Shard, c.Shards)
	if c.CPUProfile != "" && p.prof == nil {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		p.prof = f
	}
	return nil
}

func (p *plugin) Collect(_ context.Context, w *sdk.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan.Write(w)
	p.collects++
	if p.prof != nil && p.collects >= p.cfg.ProfileCollects {
		// The batches of this collect are still being sent; the profile
		// covers the previous collects' sends and this one's writes.
		pprof.StopCPUProfile()
		p.prof.Close()
		p.prof = nil
	}
	return nil
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "plexporter-")
	sdk.Serve(&plugin{name: name})
}
