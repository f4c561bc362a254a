package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScanDeviceJobs measures one cgroup_jobs scan: over this
// machine's /proc (its processes are in no Slurm job: the cost of reading
// every cgroup file), and over a synthetic procfs of a busy compute node,
// 2000 processes of which 128 are MPI ranks of one job holding 200 fds
// each, one of them the uverbs device.
func BenchmarkScanDeviceJobs(b *testing.B) {
	sys, _ := procJobs(b)
	b.Run("this machine", func(b *testing.B) {
		for b.Loop() {
			if _, err := scanDeviceJobs(osProcfs{}, "/proc", newDeviceFiles(resolver{sysfs: sys}), defaultMaxPids); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("2000 processes, 128 ranks x 200 fds", func(b *testing.B) {
		proc := b.TempDir()
		for pid := 1; pid <= 2000; pid++ {
			dir := filepath.Join(proc, fmt.Sprint(pid))
			if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
				b.Fatal(err)
			}
			cg := "0::/system.slice/sshd.service\n"
			fds := 4
			if pid > 1000 && pid <= 1128 {
				cg, fds = "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n", 200
			}
			os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cg), 0o644)
			for fd := range fds {
				target := fmt.Sprintf("/scratch/rank/file%d", fd)
				if fd == 3 {
					target = "/dev/infiniband/uverbs0"
				}
				os.Symlink(target, filepath.Join(dir, "fd", fmt.Sprint(fd)))
			}
		}
		for b.Loop() {
			s, err := scanDeviceJobs(osProcfs{}, proc, newDeviceFiles(resolver{sysfs: sys}), defaultMaxPids)
			if err != nil || len(s.Uses) != 1 || s.JobProcesses != 128 {
				b.Fatalf("%+v %v", s, err)
			}
		}
	})
}
