package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

// TestCgroupJobsInHostSandbox measures what the process scan needs, as the
// host runs the plugin: a root-owned child holds a device file open from
// a Slurm job's cgroup, and the plugin scans this machine's /proc.
//
//   - unsandboxed (--no-plugin.sandbox, the plugin runs as the host's
//     user, root), the job's device is found;
//   - sandboxed, with {procfs} read-only and CAP_SYS_PTRACE plus
//     CAP_DAC_READ_SEARCH granted, the child's cgroup file is read (it is
//     world-readable) but every readlink of its /proc/<pid>/fd is refused:
//     Landlock denies ptrace access, PTRACE_MODE_READ included, to
//     processes outside the plugin's domain, whatever its capabilities. The
//     scan says so (a collect error, attribution_unreadable_fd_dirs_total).
//
// That is why the shipped manifest grants nothing for cgroup_jobs and the
// README says the scan works only with the plugin unsandboxed.
func TestCgroupJobsInHostSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the host")
	}
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (CI runs as root)")
	}
	uverbs := fmt.Sprintf("uverbs%d", 900+os.Getpid()%1000)
	dev := makeDeviceNode(t, filepath.Join("/dev/infiniband", uverbs))
	job := strconv.Itoa(4_300_000 + os.Getpid()%100_000)
	cg := makeCgroup(t, "/sys/fs/cgroup/freezer", "slurm/uid_0/job_"+job+"/step_0")
	child := startHolding(t, dev)
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(child.Process.Pid)), 0o644); err != nil {
		t.Skipf("cannot move the child into %s: %v", cg, err)
	}

	dir, err := os.MkdirTemp("", "plexporter-attribution-procjobs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	plugins := filepath.Join(dir, "plugins")
	sys := filepath.Join(dir, "sys")
	for _, d := range []string{plugins, filepath.Join(sys, "class", "infiniband_verbs", uverbs)} {
		mkdirAll(t, d)
	}
	for d := sys; d != dir; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	if err := os.WriteFile(filepath.Join(sys, "class", "infiniband_verbs", uverbs, "ibdev"), []byte("mlx5_test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build(t, filepath.Join(dir, "plexporter"), "./host")
	build(t, filepath.Join(plugins, "plexporter-attribution"), "./plugins/attribution")
	manifest, err := os.ReadFile("plexporter-attribution.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "plexporter-attribution.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	series := `device_cgroup_job_info{device_kind="rdma",device="mlx5_test",job_id="` + job + `"} 1`

	t.Run("unsandboxed", func(t *testing.T) {
		text, _ := scrapeHost(t, dir, sys, "", "--no-plugin.sandbox")
		for _, want := range []string{series, `attribution_unreadable_fd_dirs_total 0`, `plexporter_plugin_sandboxed{plugin="attribution"} 0`} {
			if !strings.Contains(text, want) {
				t.Errorf("the unsandboxed plugin's output lacks %s", want)
			}
		}
	})
	t.Run("sandboxed with ptrace", func(t *testing.T) {
		grant := `    manifest:
      capabilities: [CAP_DAC_OVERRIDE, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH]
      paths:
        read_only: ["{sysfs}", "{procfs}"]
`
		text, logs := scrapeHost(t, dir, sys, grant)
		if strings.Contains(text, series) {
			t.Errorf("the sandboxed plugin read another domain's fds: Landlock's ptrace scoping is not what README.md says\n%s", text)
		}
		for _, want := range []string{`plexporter_plugin_sandboxed{plugin="attribution"} 1`, `attribution_collection_errors_total{collector="cgroup_jobs"} `} {
			if !strings.Contains(text, want) {
				t.Errorf("the sandboxed plugin's output lacks %s", want)
			}
		}
		if strings.Contains(text, `attribution_unreadable_fd_dirs_total 0`) {
			t.Error("the refused fd directory is not counted")
		}
		// What the refusal looks like, for README.md.
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs.String(), "processes of Slurm jobs"); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no error about the unreadable fd directories")
			}
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "processes of Slurm jobs") {
				t.Logf("measured: %s", line)
				if !strings.Contains(line, "permission denied") {
					t.Errorf("the refusal is not EACCES: %s", line)
				}
				break
			}
		}
	})
}

// scrapeHost starts the built host with the plugin's cgroup_jobs on over
// this machine's /proc and sysfs root sys, plus the manifest override
// grant (YAML under plugins.attribution) and flags, and returns its first
// scrape that has the plugin's cgroup_jobs counter, and its log.
func scrapeHost(t *testing.T, dir, sys, grant string, flags ...string) (string, *syncbuf.Buffer) {
	t.Helper()
	cfg := filepath.Join(dir, "plexporter.yml")
	// The operator's opt-in to every capability a grant below may name.
	config := "plugins:\n  attribution:\n    allow_capabilities: [CAP_DAC_OVERRIDE, CAP_SYS_PTRACE]\n    config:\n      pod_resources_socket: \"\"\n      cgroup_jobs: true\n" + grant
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logs := &syncbuf.Buffer{}
	args := append([]string{"--plugin.dir=" + filepath.Join(dir, "plugins"), "--config.file=" + cfg,
		"--path.sysfs=" + sys, "--path.procfs=/proc", "--path.rootfs=/", "--web.listen-address=" + addr}, flags...)
	cmd := exec.Command(filepath.Join(dir, "plexporter"), args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		text := get(addr)
		if strings.Contains(text, `attribution_collection_errors_total{collector="cgroup_jobs"}`) {
			return text, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attribution series after 60s:\n%s", text)
		}
	}
}
