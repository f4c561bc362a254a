package main

import (
	"strings"
	"testing"
)

// TestDeviceExcludeAcrossPlugins: --device.exclude leaves the device out of
// every family that names it in the merged scrape (the shipped plugins over
// the demo node), keeps the other devices and the series without a device
// label. The cross-plugin case (rdma and ethtool families of one device)
// is pinned in internal/guard; this checks the flag reaches the guard.
func TestDeviceExcludeAcrossPlugins(t *testing.T) {
	t.Parallel() // it mostly waits for plugins to start; its hosts share nothing
	st := newSandboxTree(t)
	installShipped(t, st)
	tree := demoTree(t)
	h := startSandboxHost(t, st, "", "--path.sysfs="+tree.Sysfs, "--path.procfs="+tree.Procfs, "--device.exclude=^mlx5_1$")
	h.scrape("")
	text, mfs := h.scrape("")
	if strings.Contains(text, `device="mlx5_1"`) {
		t.Errorf("excluded device mlx5_1 still exposed:\n%s", grepLines(text, `device="mlx5_1"`))
	}
	for _, want := range []string{`rdma_port_info{device="mlx5_0"`, `rdma_port_rcv_data_total{device="mlx5_0"`, `nvme_info{device="nvme0"`, `nfs_rpc_count_total{`} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s…", want)
		}
	}
	// The demo node has mlx5_1: without the flag it is there.
	free := startSandboxHost(t, st, "", "--path.sysfs="+tree.Sysfs, "--path.procfs="+tree.Procfs)
	if all, _ := free.scrape(""); !strings.Contains(all, `rdma_port_info{device="mlx5_1"`) {
		t.Fatal("the demo node has no mlx5_1: the exclusion above tests nothing")
	}
	if n := value(mfs, "plexporter_plugin_up", "plugin", "rdma"); n != 1 {
		t.Errorf("rdma plugin up = %v", n)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
