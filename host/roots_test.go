package main

// Grants follow the roots: every shipped plugin, sandboxed by its own
// manifest, reads a node's file systems wherever --path.sysfs and
// --path.procfs put them (a container's /host/sys and /host/proc), and
// serves exactly what it serves unconfined.

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/plexporter/plexporter/internal/dev/demo/demotree"
)

// installShipped copies every shipped plugin and its manifest into st's
// plugin directory and returns their names.
func installShipped(t *testing.T, st *sandboxTree) []string {
	t.Helper()
	bins, _ := filepath.Glob(filepath.Join(binDir, "shipped", "plexporter-*"))
	if len(bins) == 0 {
		t.Fatal("no shipped plugins built")
	}
	var names []string
	for _, b := range bins {
		name := strings.TrimPrefix(filepath.Base(b), "plexporter-")
		names = append(names, name)
		copyFile(t, b, filepath.Join(st.plugins, filepath.Base(b)), 0o755)
		copyFile(t, filepath.Join("..", "plugins", name, "plexporter-"+name+".yaml"), filepath.Join(st.plugins, "plexporter-"+name+".yaml"), 0o644)
	}
	return names
}

// demoTree builds the shipped fixtures' node (internal/dev/demo/demotree) at a
// root nothing in the manifests names: <tmp>/node/host, like /host in a pod.
func demoTree(t *testing.T) demotree.Tree {
	t.Helper()
	base, err := os.MkdirTemp("", "plexporter-roots")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil { // the plugins' user walks through it
		t.Fatal(err)
	}
	tree, err := demotree.Build("..", filepath.Join(base, "node", "host"))
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(base, "node"), 0o755)
	return tree
}

// pluginSeries renders the plugins' own series of a scrape, one
// "name{labels} value" line each, sorted, with the host's collect-error
// counters (a sandbox that denies a read shows there) but none of its other
// self-metrics, which differ between any two hosts.
func pluginSeries(mfs map[string]*dto.MetricFamily) []string {
	var out []string
	for name, mf := range mfs {
		if name != "plexporter_plugin_collect_errors_total" && (strings.HasPrefix(name, "plexporter_") || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")) {
			continue
		}
		// The ebpf plugin's counts follow the machine's live I/O and
		// traffic, which two hosts never see alike; its program states
		// and errors are compared.
		if strings.HasPrefix(name, "disk_") || strings.HasSuffix(name, "_tcp_retransmits_total") || strings.HasPrefix(name, "ebpf_tcp_") || name == "ebpf_events_dropped_total" {
			continue
		}
		// The guest plugin's soft-lockup tailer reads /dev/kmsg, which no
		// root redirects: the sandboxed plugin has no CAP_SYSLOG under
		// dmesg_restrict=1 (its manifest grants none, plugins/guest/README.md)
		// and counts the refused open, while the unconfined root reads it.
		if name == "kernel_soft_lockups_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			kmsg := false
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
				kmsg = kmsg || name == "guest_collection_errors_total" && l.GetName() == "collector" && l.GetValue() == "kmsg"
			}
			if kmsg {
				continue
			}
			sort.Strings(labels)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			out = append(out, name+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	sort.Strings(out)
	return out
}

// familyCount counts the series of a plugin's families (by name prefix).
func familyCount(series []string, prefix string) int {
	n := 0
	for _, s := range series {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func TestShippedPluginsFollowTheRoots(t *testing.T) {
	t.Parallel() // it mostly waits for plugins to start; its hosts share nothing
	st := newSandboxTree(t)
	names := installShipped(t, st)
	tree := demoTree(t)
	roots := []string{"--path.sysfs=" + tree.Sysfs, "--path.procfs=" + tree.Procfs}

	sandboxed := startSandboxHost(t, st, "", roots...)
	unconfined := startSandboxHost(t, st, "", append(roots, "--no-plugin.sandbox")...)
	// Two scrapes each: counters that grow per scrape (failed reads) must
	// grow alike.
	sandboxed.scrape("")
	unconfined.scrape("")
	_, sbox := sandboxed.scrape("")
	_, free := unconfined.scrape("")
	for _, name := range names {
		if value(sbox, "plexporter_plugin_sandboxed", "plugin", name) != 1 || value(free, "plexporter_plugin_sandboxed", "plugin", name) != 0 {
			t.Fatalf("%s: plexporter_plugin_sandboxed must be 1 and 0 in the two hosts", name)
		}
	}
	got, want := pluginSeries(sbox), pluginSeries(free)
	if !slices.Equal(got, want) {
		t.Errorf("sandboxed over %s the plugins serve other series than unconfined:\nonly sandboxed:\n  %s\nonly unconfined:\n  %s",
			tree.Root, strings.Join(minus(got, want), "\n  "), strings.Join(minus(want, got), "\n  "))
	}
	// The comparison means something only if the tree was read: each
	// plugin's fixture-backed families are there (counted in the fixtures'
	// goldens: rdma's sysfs tree alone has 223 series).
	for prefix, least := range map[string]int{
		"rdma_port_info{": 5, "rdma_port_rcv_data_total{": 3, // rdma over sysfs
		"nfs_rpc_count_total{": 15, "nfs_xprt_tcp_state{": 4, "nfs_server_connections{": 1, // nfs over procfs
		"nvme_info{": 3, // nvme identity over sysfs
	} {
		if n := familyCount(got, prefix); n < least {
			t.Errorf("sandboxed: %d series %s…}, want at least %d", n, prefix, least)
		}
	}
	if n := familyCount(got, "rdma_"); n < 223 {
		t.Errorf("sandboxed: %d rdma_ series, want the fixture's 223 or more", n)
	}
	if t.Failed() {
		t.Logf("sandboxed series:\n%s", strings.Join(got, "\n"))
	}
}

// The same tree under manifests that grant absolute /sys and /proc paths
// (what every shipped manifest did before placeholders) reads nothing: the
// test above fails without the placeholders.
func TestAbsoluteGrantsDoNotFollowTheRoots(t *testing.T) {
	t.Parallel() // it mostly waits for plugins to start; its hosts share nothing
	st := newSandboxTree(t)
	installShipped(t, st)
	os.WriteFile(filepath.Join(st.plugins, "plexporter-rdma.yaml"), []byte("paths: {read_only: [/sys/class/infiniband, /sys/devices, /sys/bus/pci/devices]}\nnetwork: {netlink: [rdma]}\n"), 0o644)
	tree := demoTree(t)
	h := startSandboxHost(t, st, "", "--path.sysfs="+tree.Sysfs, "--path.procfs="+tree.Procfs)
	_, mfs := h.scrape("")
	if n := familyCount(pluginSeries(mfs), "rdma_port_info{"); n != 0 {
		t.Errorf("rdma read %d ports through grants of another tree", n)
	}
	if value(mfs, "plexporter_plugin_collect_errors_total", "plugin", "rdma", "collector", "sysfs") < 1 {
		t.Error("a denied class directory must be a collect error")
	}
}

// minus lists what a has and b does not.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// deniedSource is one source a plugin's grant leaves out, and where the
// denial must show: the host's collect-error counter for collector and
// the plugin's own counter (family with labels).
type deniedSource struct {
	plugin, collector string
	own               string   // the plugin's own error counter family
	ownLabels         []string // its labels, name value ...
}

// Reading nothing is an error you can see: a plugin whose grant leaves out
// a source it reads reports it, in the host's and its own error counters,
// the log and `plexporter plugins` LAST ERROR. Two layouts: nothing granted
// (the source's directory is denied), and the class directory granted
// without the device directories it links to.
func TestDeniedSourcesAreCollectErrors(t *testing.T) {
	t.Parallel() // it mostly waits for plugins to start; its hosts share nothing
	for _, layout := range []struct {
		name, overrides string
		want            []deniedSource
	}{
		{"nothing granted",
			`  rdma: {manifest: {paths: {read_only: []}}}
  ethtool: {manifest: {paths: {read_only: []}}}
  nfs: {manifest: {paths: {read_only: []}}}
  nvme: {manifest: {paths: {read_only: []}}}
`, []deniedSource{
				{"rdma", "sysfs", "rdma_scrape_errors_total", nil},
				{"ethtool", "rdma_sysfs", "ethtool_collection_errors_total", []string{"collector", "rdma_sysfs"}},
				{"ethtool", "netdevs", "ethtool_collection_errors_total", []string{"collector", "netdevs"}},
				{"nfs", "mountstats", "nfs_collection_errors_total", []string{"collector", "mountstats"}},
				{"nvme", "controllers", "nvme_collection_errors_total", []string{"collector", "controllers"}},
			}},
		{"classes without their devices",
			`  rdma: {manifest: {paths: {read_only: ["{sysfs}/class/infiniband"]}}}
  ethtool: {manifest: {paths: {read_only: ["{sysfs}/class/infiniband", "{sysfs}/class/net"]}}}
  nfs: {manifest: {paths: {read_only: ["{procfs}/self/mountstats"]}}}
  nvme: {manifest: {paths: {read_only: ["{sysfs}/class/nvme"]}}}
`, []deniedSource{
				{"rdma", "sysfs", "rdma_scrape_errors_total", nil},
				{"ethtool", "rdma_sysfs", "ethtool_collection_errors_total", []string{"collector", "rdma_sysfs"}},
				{"nfs", "tcp", "nfs_collection_errors_total", []string{"collector", "tcp"}},
				{"nvme", "identity", "nvme_collection_errors_total", []string{"collector", "identity"}},
			}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			st := newSandboxTree(t)
			installShipped(t, st)
			tree := demoTree(t)
			roots := []string{"--path.sysfs=" + tree.Sysfs, "--path.procfs=" + tree.Procfs}
			h := startSandboxHost(t, st, layout.overrides, roots...)
			_, mfs := h.scrape("")
			for _, d := range layout.want {
				if v := value(mfs, "plexporter_plugin_collect_errors_total", "plugin", d.plugin, "collector", d.collector); v < 1 {
					t.Errorf("%s: plexporter_plugin_collect_errors_total{collector=%q} = %v, want ≥ 1", d.plugin, d.collector, v)
				}
				if v := value(mfs, d.own, d.ownLabels...); v < 1 {
					t.Errorf("%s: %s%v = %v, want ≥ 1", d.plugin, d.own, d.ownLabels, v)
				}
				// The host's stderr reaches h.logs through a pipe copier: on a
				// loaded machine the line lands after the scrape returns.
				logged := func() bool {
					return len(linesWith(h.logs.String(), "partial error", "plugin="+d.plugin, "collector="+d.collector, "permission denied")) > 0
				}
				for deadline := time.Now().Add(minWait); !logged() && time.Now().Before(deadline); {
					time.Sleep(50 * time.Millisecond)
				}
				if !logged() {
					t.Errorf("%s: no log line says the %s source was denied", d.plugin, d.collector)
				}
			}
			for _, name := range []string{"rdma", "ethtool", "nfs", "nvme"} {
				line := pluginsLine(t, name, "--plugin.dir="+st.plugins, "--config.file="+h.cfgPath, "--plugin.sandbox", roots[0], roots[1])
				if !strings.Contains(line, "permission denied") {
					t.Errorf("plexporter plugins LAST ERROR of %s does not say what was denied:\n%s", name, line)
				}
			}
		})
	}
}
