package main

// pid_namespace: host (docs/security.md): the plugin shares the host's PID
// namespace and sees its processes, and Landlock's signal scope is what
// keeps it from signalling those of its own uid.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	dto "github.com/prometheus/client_model/go"
)

// startSibling starts a process as uid/gid outside any sandbox: what a
// plugin of that uid in the host's PID namespace could reach by pid.
func startSibling(t *testing.T, uid, gid uint32) int {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// pidNamespaceDepth is how many PID namespaces this process is in.
func pidNamespaceDepth(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			return len(strings.Fields(rest))
		}
	}
	t.Fatal("no NSpid in /proc/self/status")
	return 0
}

// changeSibling are the probe's actions that change another process's
// scheduling or limits, which the kernel allows to the same uid.
var changeSibling = []string{"renice_sibling", "set_sibling_affinity", "set_sibling_rlimit"}

func TestSandboxHostPIDNamespace(t *testing.T) {
	st := newSandboxTree(t)
	if v, err := llsyscall.LandlockGetABIVersion(); err != nil || v < 6 {
		t.Skipf("Landlock ABI %d (%v): pid_namespace: host is refused without the signal scope of ABI 6", v, err)
	}
	sibling := startSibling(t, 65534, 65534) // the probes' nobody/nogroup
	// {procfs} read: the attribution plugin's rdma_qp_owners reads the
	// cgroup of the processes the kernel names.
	manifest := "user: nobody\ngroup: nogroup\npaths: {read_only: [\"{procfs}\"]}\n"
	st.install(t, "hostns", manifest+"pid_namespace: host\n")
	st.install(t, "privatens", manifest)
	cfg := fmt.Sprintf("{config: {sibling_pid: %d}}", sibling)
	plugins := fmt.Sprintf("  hostns: %s\n  privatens: %s\n", cfg, cfg)
	depth := float64(pidNamespaceDepth(t))

	want := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	on := startSandboxHost(t, st, plugins)
	text, _ := on.scrape("")
	_, hostns := on.scrape("?collect[]=hostns")
	_, private := on.scrape("?collect[]=privatens")
	for name, mfs := range map[string]map[string]*dto.MetricFamily{"hostns": hostns, "privatens": private} {
		if value(mfs, "plexporter_plugin_sandboxed", "plugin", name) != 1 || value(mfs, "plexporter_plugin_up", "plugin", name) != 1 {
			t.Fatalf("%s not up and sandboxed:\n%s", name, text)
		}
	}
	want("hostns: PID namespace depth (the host's)", value(hostns, "probe_pid_namespace_depth"), depth)
	want("hostns: sees the sibling", value(hostns, "probe_allowed", "action", "see_sibling"), 1)
	want("hostns: reads the sibling's cgroup", value(hostns, "probe_allowed", "action", "read_sibling_cgroup"), 1)
	// Same uid, so only Landlock's signal scope can deny it.
	want("hostns: signals a same-uid process outside its domain", value(hostns, "probe_allowed", "action", "signal_sibling", "detail", "operation not permitted"), 0)

	// Landlock has no hook for these: the host PID namespace's seccomp
	// filter (sandbox/hostpid.go) denies them, and leaves them on itself.
	for _, action := range changeSibling {
		want("hostns: "+action, value(hostns, "probe_allowed", "action", action, "detail", "operation not permitted"), 0)
		want("privatens: "+action, value(private, "probe_allowed", "action", action, "detail", "no such process"), 0)
	}
	want("hostns: renice and rlimit itself", value(hostns, "probe_allowed", "action", "renice_and_rlimit_self"), 1)
	want("privatens: PID namespace depth (one below the host's)", value(private, "probe_pid_namespace_depth"), depth+1)
	want("privatens: sees the sibling", value(private, "probe_allowed", "action", "see_sibling", "detail", "no such process"), 0)
	want("privatens: signals the sibling", value(private, "probe_allowed", "action", "signal_sibling", "detail", "no such process"), 0)

	// The same checks with the sandbox off must succeed, or the denials
	// above prove nothing. Unsandboxed the probes run as root, so their
	// same-uid sibling is root's: root may not change another uid's
	// rlimits without CAP_SYS_RESOURCE, which a host need not hold.
	rootSibling := startSibling(t, 0, 0)
	cfg = fmt.Sprintf("{config: {sibling_pid: %d}}", rootSibling)
	off := startSandboxHost(t, st, fmt.Sprintf("  hostns: %s\n  privatens: %s\n", cfg, cfg), "--no-plugin.sandbox")
	for _, name := range []string{"hostns", "privatens"} {
		_, free := off.scrape("?collect[]=" + name)
		want(name+" unsandboxed: sandboxed", value(free, "plexporter_plugin_sandboxed", "plugin", name), 0)
		want(name+" unsandboxed: PID namespace depth", value(free, "probe_pid_namespace_depth"), depth)
		for _, action := range append([]string{"see_sibling", "signal_sibling", "read_sibling_cgroup", "renice_and_rlimit_self"}, changeSibling...) {
			want(name+" unsandboxed: "+action, value(free, "probe_allowed", "action", action), 1)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", sibling)); err != nil {
		t.Errorf("the sibling died: %v", err)
	}
}
