package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/plexporter/plexporter/internal/sysfs"
	"github.com/plexporter/plexporter/sdk/fixture"
)

// nodeExporterBin is Debian's node_exporter (package prometheus-node-exporter).
const nodeExporterBin = "prometheus-node-exporter"

const (
	rdmaDevices = 16
	rdmaPorts   = 2
	nfsMounts   = 50
	nfsNconnect = 8
)

// startNodeExporter runs node_exporter with only the given flags on a free
// loopback port.
func (h *harness) startNodeExporter(name string, args ...string) (*exporter, error) {
	return h.startNodeExporterIn(nil, name, args...)
}

// startNodeExporterIn is startNodeExporter in the network namespace ns
// (nil: the harness's).
func (h *harness) startNodeExporterIn(ns *benchNetns, name string, args ...string) (*exporter, error) {
	bin, err := exec.LookPath(nodeExporterBin)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = append(args, "--web.listen-address="+addr)
	if ns != nil {
		bin, args = ns.command(bin, args)
		netnsAddrs.Store(addr, ns.path)
	}
	p, err := h.startProc(name, addr, bin, args, nil)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(p, "/", 5*time.Millisecond, 30*time.Second); err != nil {
		return nil, err
	}
	return &exporter{proc: p, path: "/metrics"}, nil
}

// shippedPlugin returns bin/plugins/plexporter-<name>, or "" if it is not built.
func (h *harness) shippedPlugin(name string) string {
	path := filepath.Join(h.binDir, "plugins", "plexporter-"+name)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// versusPlugin returns the shipped plugin a scenario against node_exporter
// runs, or "" after marking sec skipped when the plugin is not built or
// node_exporter is not installed.
func (h *harness) versusPlugin(sec *section, name string) string {
	plugin := h.shippedPlugin(name)
	if plugin == "" {
		sec.skipped = fmt.Sprintf("bin/plugins/plexporter-%s is not built (the %s plugin is missing).", name, name)
		return ""
	}
	if _, err := exec.LookPath(nodeExporterBin); err != nil {
		sec.skipped = nodeExporterBin + " is not installed (`apt-get install -y prometheus-node-exporter`)."
		return ""
	}
	return plugin
}

// versus starts the plexporter host of spec ("<name>-plexporter") and
// node_exporter with neArgs ("<name>-node_exporter") on the same tree,
// measures them interleaved, in text format, and describes both expositions.
// node_exporter runs in the host's network namespace (spec.netns).
func (h *harness) versus(sec *section, name string, spec hostSpec, neArgs []string, plexPrefix, nePrefix string) (*cell, *cell, error) {
	spec.name = name + "-plexporter"
	plex, err := h.startHost(spec)
	if err != nil {
		return nil, nil, err
	}
	ne, err := h.startNodeExporterIn(spec.netns, name+"-node_exporter", neArgs...)
	if err != nil {
		return nil, nil, err
	}
	pb, err := h.getBody(plex.url + plex.path)
	if err != nil {
		return nil, nil, err
	}
	nb, err := h.getBody(ne.url + ne.path)
	if err != nil {
		return nil, nil, err
	}
	ps, ns := seriesLines(pb, plexPrefix), seriesLines(nb, nePrefix)
	if ps == 0 || ns == 0 {
		return nil, nil, fmt.Errorf("no data: plexporter exposes %d %s* series, node_exporter %d %s* series (logs: %s, %s)", ps, plexPrefix, ns, nePrefix, plex.logPath, ne.logPath)
	}
	cells, err := h.compare(fmtText, plex, ne)
	if err != nil {
		return nil, nil, err
	}
	P, N := cells[0], cells[1]
	sec.text = append(sec.text, table([]string{"exporter", "wall ms", "CPU ms", "series (collector's families)", "families", "series (whole body)", "bytes"}, [][]string{
		{"plexporter host + plugin", ms(P.Wall()), ms(P.CPU()), fmt.Sprintf("%d `%s*`", ps, plexPrefix), fmt.Sprint(familyCount(pb, plexPrefix)), fmt.Sprint(seriesLines(pb)), fmt.Sprint(P.bytes)},
		{"node_exporter", ms(N.Wall()), ms(N.CPU()), fmt.Sprintf("%d `%s*`", ns, nePrefix), fmt.Sprint(familyCount(nb, nePrefix)), fmt.Sprint(seriesLines(nb)), fmt.Sprint(N.bytes)},
		{"node_exporter / plexporter", ratio(N.Wall(), P.Wall()), ratio(N.CPU(), P.CPU()), ratio(float64(ns), float64(ps)), "", "", ""},
	}))
	sec.text = append(sec.text, fmt.Sprintf("Per collected series: plexporter %.1f µs CPU, node_exporter %.1f µs CPU. "+
		"plexporter's CPU per scrape splits into %s ms in the host and %s ms in the plugin.",
		P.CPU()/float64(ps)*1e6, N.CPU()/float64(ns)*1e6, ms(P.HostCPU()), ms(P.CPU()-P.HostCPU())))
	return P, N, nil
}

// scenarioRDMA is scenario 2.
func (h *harness) scenarioRDMA() error {
	sec := section{id: "2", title: fmt.Sprintf("rdma: plexporter-rdma vs node_exporter --collector.infiniband (%d devices × %d ports)", rdmaDevices, rdmaPorts)}
	defer func() { h.report.add(sec) }()
	plugin := h.versusPlugin(&sec, "rdma")
	if plugin == "" {
		return nil
	}
	tree := filepath.Join(h.trees, "rdma-tree")
	if err := fixture.Unpack(filepath.Join(h.root, "plugins", "rdma", "testdata", "sysfs.ttar"), tree); err != nil {
		return err
	}
	sys := filepath.Join(tree, "sys")
	devs, err := scaleRDMA(sys, rdmaDevices, rdmaPorts)
	if err != nil {
		return err
	}
	h.rdmaSys = sys
	// A directory changed in the last 2 s may hide a change made in the same
	// clock tick, so the plugin re-lists it on every collect until it is
	// older (sysfs.Dir.RefreshIfChanged's racy window). The directories of
	// a real /sys are as old as their device's probe; so that the plugin is
	// measured on a tree like that, not on one written a moment ago, the
	// scrapes start once the tree has settled.
	time.Sleep(settleAfterWrite)
	sec.text = append(sec.text, fmt.Sprintf("Tree: the rdma plugin's fixture (`plugins/rdma/testdata/sysfs.ttar`) with its mlx5 "+
		"physical functions copied to %d devices (%s … %s) of %d ports each, relative symlinks rewritten, on tmpfs "+
		"(`/dev/shm`) when there is one. plexporter: the host with only the rdma plugin, `--path.sysfs=<tree>/sys`, `optional_counters: "+
		"false` (netlink is not read: node_exporter does not read it either). node_exporter: `--collector.disable-defaults "+
		"--collector.infiniband --path.sysfs=<tree>/sys`. Both bodies include their exporter's own `go_*`/`process_*` "+
		"families; plexporter's also its `plexporter_*` self-metrics.", len(devs), devs[0], devs[len(devs)-1], rdmaPorts))
	P, N, err := h.versus(&sec, "rdma", hostSpec{
		plugins: map[string]string{"rdma": plugin},
		config:  fmt.Sprintf("  rdma: {config: {optional_counters: false, qp_counters: false}, manifest: {paths: {read_only: [%q]}}}\n", tree),
		args:    []string{"--path.sysfs=" + sys, "--log.level=warn"},
	}, []string{"--collector.disable-defaults", "--collector.infiniband", "--path.sysfs=" + sys}, "rdma_", "node_infiniband_")
	if err != nil {
		return err
	}
	h.report.atLeast("2", fmt.Sprintf("rdma, %d×%d ports: node_exporter CPU / plexporter CPU per scrape ≥ 2", rdmaDevices, rdmaPorts), "×", N.CPU()/P.CPU(), 2)
	return nil
}

// settleAfterWrite is how long a fixture tree is left alone after it was
// written before a plugin that holds its directories is measured on it.
const settleAfterWrite = sysfs.RacyWindow + 100*time.Millisecond

// scenarioNFS is scenario 3.
func (h *harness) scenarioNFS() error {
	sec := section{id: "3", title: fmt.Sprintf("nfs: plexporter-nfs vs node_exporter --collector.mountstats (%d mounts × nconnect %d)", nfsMounts, nfsNconnect)}
	defer func() { h.report.add(sec) }()
	plugin := h.versusPlugin(&sec, "nfs")
	if plugin == "" {
		return nil
	}
	root := filepath.Join(h.trees, "nfs-procfs")
	if err := buildProcfs(root, filepath.Join(h.root, "plugins", "nfs", "testdata", "mountstats-nfs4.2-nconnect4"), nfsMounts, nfsNconnect); err != nil {
		return err
	}
	sec.text = append(sec.text, fmt.Sprintf("Tree: `<procfs>/4242/{mountstats,mountinfo,net/tcp}` and `self -> 4242`, generated from the nfs "+
		"plugin's `mountstats-nfs4.2-nconnect4` fixture: its non-NFS mounts, then %d NFSv4.2 mounts over %d servers, each "+
		"with %d `xprt:` lanes and the fixture's events, bytes and per-op lines; `net/tcp` holds the %d servers' nconnect "+
		"connections. plexporter: the host with only the nfs plugin, `--path.procfs=<tree>` (the plugin's default "+
		"`mountstats_path`, `<procfs>/self/mountstats`). node_exporter: `--collector.disable-defaults --collector.mountstats "+
		"--path.procfs=<tree>`. The plugin exports per-lane and per-socket series that node_exporter does not; node_exporter "+
		"exports every operation of the per-op table, the plugin a configurable set (15 by default).",
		nfsMounts, nfsServers, nfsNconnect, nfsServers))
	P, N, err := h.versus(&sec, "nfs", hostSpec{
		plugins: map[string]string{"nfs": plugin},
		config:  fmt.Sprintf("  nfs: {manifest: {paths: {read_only: [%q]}}}\n", root),
		args:    []string{"--path.procfs=" + root, "--log.level=warn"},
	}, []string{"--collector.disable-defaults", "--collector.mountstats", "--path.procfs=" + root}, "nfs_", "node_mountstats_nfs_")
	if err != nil {
		return err
	}
	h.report.info("3", fmt.Sprintf("nfs, %d mounts × nconnect %d: report the CPU ratio (no target)", nfsMounts, nfsNconnect),
		fmt.Sprintf("node_exporter / plexporter = %s CPU, %s wall", ratio(N.CPU(), P.CPU()), ratio(N.Wall(), P.Wall())))
	return nil
}
