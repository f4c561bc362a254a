package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestCgroupJobsRealProcess runs the scan over this machine's /proc: a
// child holds a device file open from a cgroup named as Slurm names a
// job's step, and the plugin must find it, as root (the scan of another
// user's processes needs what README.md's sandbox section says).
//
// The device file is a character device with /dev/null's numbers made at
// /dev/infiniband/uverbs<N> (the plugin knows device files by their path:
// devfiles.go), and the test's sysfs says uverbs<N> is the RDMA device
// mlx5_test. The cgroups are a cgroup v1 freezer hierarchy and cgroup v2
// (the hybrid layout's unified mount, or the v2 root), whichever this
// machine has; a layout it lacks is skipped.
func TestCgroupJobsRealProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a device node and cgroups needs root (CI runs as root)")
	}
	n := 900 + os.Getpid()%1000
	uverbs := fmt.Sprintf("uverbs%d", n)
	dev := makeDeviceNode(t, filepath.Join("/dev/infiniband", uverbs))
	sys := t.TempDir()
	mkdirAll(t, filepath.Join(sys, "class", "infiniband_verbs", uverbs))
	if err := os.WriteFile(filepath.Join(sys, "class", "infiniband_verbs", uverbs, "ibdev"), []byte("mlx5_test\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	job := strconv.Itoa(4_200_000 + os.Getpid()%100_000)
	for _, layout := range []struct{ name, mount, path string }{
		{"cgroup v1", "/sys/fs/cgroup/freezer", "slurm/uid_0/job_" + job + "/step_0"},
		{"cgroup v2 hybrid", "/sys/fs/cgroup/unified", "system.slice/slurmstepd.scope/job_" + job + "/step_0"},
		{"cgroup v2", "/sys/fs/cgroup", "system.slice/slurmstepd.scope/job_" + job + "/step_0"},
	} {
		t.Run(layout.name, func(t *testing.T) {
			cg := makeCgroup(t, layout.mount, layout.path)
			child := startHolding(t, dev)
			if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(child.Process.Pid)), 0o644); err != nil {
				t.Skipf("cannot move the child into %s: %v", cg, err)
			}
			opts := sdktest.Options{Sysfs: sys, Procfs: "/proc", Rootfs: "/", Config: map[string]any{"pod_resources_socket": "", "cgroup_jobs": true}}
			text := sdktest.Run(t, newPlugin(), opts).Text(t)
			sdktest.Contains(t, text,
				`device_cgroup_job_info{device_kind="rdma",device="mlx5_test",job_id="`+job+`"} 1`,
				`attribution_unreadable_fd_dirs_total 0`,
			)
			// Once the child has exited, its job holds nothing.
			child.Process.Kill()
			child.Wait()
			text = sdktest.Run(t, newPlugin(), opts).Text(t)
			sdktest.Lacks(t, text, `job_id="`+job+`"`)
		})
	}
}

// makeDeviceNode makes a character device with /dev/null's numbers at
// path (and its directory, if missing), removed when the test ends.
func makeDeviceNode(t *testing.T, path string) string {
	t.Helper()
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("cannot make %s: %v", dir, err)
		}
		t.Cleanup(func() { os.Remove(dir) })
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("cannot make the device node %s: %v", path, err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return path
}

// makeCgroup makes path under a cgroup mount, skipping the test when mount
// is not one; the directories it made are removed when the test ends
// (after the child in them has exited: cleanups run last in, first out).
func makeCgroup(t *testing.T, mount, path string) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil || (st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC) {
		t.Skipf("%s is not a cgroup mount on this machine", mount)
	}
	dir := mount
	for _, elem := range splitPath(path) {
		dir = filepath.Join(dir, elem)
		if _, err := os.Stat(dir); err == nil {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("cannot make the cgroup %s: %v", dir, err)
		}
		made := dir
		t.Cleanup(func() { os.Remove(made) })
	}
	return dir
}

func splitPath(p string) []string {
	var out []string
	for p != "" && p != "." {
		out = append([]string{filepath.Base(p)}, out...)
		p = filepath.Dir(p)
	}
	return out
}

// startHolding starts a child holding path open (as its fd 3) until it is
// killed; it is killed when the test ends, if the test has not.
func startHolding(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "300")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func mkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
