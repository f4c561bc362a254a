package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// procJobs unpacks testdata/procjobs.ttar: the sriov fixture's sysfs with
// uverbs0 (mlx5_2) and uverbs1 (rxe0), nvme0 with its namespace nvme0n1
// and a fabrics controller nvme1 with the multipath path nvme1c1n1; and a
// procfs of five processes:
//
//	100  cgroup v1, job 4242 in every controller: uverbs0, nvme0n1p1, /dev/null, a socket, …
//	101  cgroup v2 slurmstepd.scope, job 77: uverbs1, nvme1n1 (multipath), the controller nvme0, rdma_cm
//	102  a login session, in no job: uverbs0, nvme0
//	103  job 4242 again (v1, another step): uverbs0 once more, a data file
//	104  job 88: uverbs9 (no such device in sysfs), a regular file /tmp/nvme0
//	105  a Kubernetes pod's container (systemd driver), in no job: uverbs0
func procJobs(t testing.TB) (sysfs, procfs string) {
	root := sdktest.Unpack(t, "testdata/procjobs.ttar")
	return filepath.Join(root, "sys"), filepath.Join(root, "proc")
}

func cgroupJobsOptions(t *testing.T, extra map[string]any) sdktest.Options {
	sys, proc := procJobs(t)
	cfg := map[string]any{"pod_resources_socket": "", "cgroup_jobs": true}
	for k, v := range extra {
		cfg[k] = v
	}
	return sdktest.Options{Sysfs: sys, Procfs: proc, Rootfs: "/", Config: cfg}
}

func TestCgroupJobs(t *testing.T) {
	text := sdktest.CleanGolden(t, sdktest.Run(t, newPlugin(), cgroupJobsOptions(t, nil)), "testdata/cgroup-jobs.golden")
	sdktest.Contains(t, text,
		// v1: the uverbs device and the partition's controller.
		`device_cgroup_job_info{device_kind="rdma",device="mlx5_2",job_id="4242"} 1`,
		`device_cgroup_job_info{device_kind="nvme",device="nvme0",job_id="4242"} 1`,
		// v2: a virtual RDMA device, a multipath namespace's controller, a
		// controller's character device.
		`device_cgroup_job_info{device_kind="rdma",device="rxe0",job_id="77"} 1`,
		`device_cgroup_job_info{device_kind="nvme",device="nvme1",job_id="77"} 1`,
		`device_cgroup_job_info{device_kind="nvme",device="nvme0",job_id="77"} 1`,
		`attribution_collection_errors_total{collector="cgroup_jobs"} 0`,
		`attribution_unreadable_fd_dirs_total 0`,
		`attribution_limit_reached_total{limit="cgroup_jobs_max_pids"} 0`,
		`attribution_limit_reached_total{limit="cgroup_jobs_max_series"} 0`,
		`attribution_limit_reached_total{limit="fds_per_process"} 0`,
	)
	// Job 88 holds nothing sysfs knows; process 102 is in no job.
	sdktest.Lacks(t, text, `job_id="88"`, `device="uverbs`, `rdma_qp_owner_info`)
	if n := strings.Count(text, "device_cgroup_job_info{"); n != 5 {
		t.Errorf("%d device_cgroup_job_info series, want 5 (process 103's uverbs0 is job 4242's already)", n)
	}
	if w := sdktest.Promtool(t, text); w != "" {
		t.Errorf("promtool check metrics:\n%s", w)
	}
}

func TestCgroupJobsOff(t *testing.T) {
	opts := cgroupJobsOptions(t, map[string]any{"cgroup_jobs": false})
	text := sdktest.Run(t, newPlugin(), opts).Text(t)
	sdktest.Lacks(t, text, "device_cgroup_job_info", `collector="cgroup_jobs"`, "attribution_unreadable_fd_dirs_total", "attribution_limit_reached_total")
}

func TestCgroupJobsLimits(t *testing.T) {
	t.Run("max pids", func(t *testing.T) {
		// /proc's order is by pid: 100 and 101 are read, 102..104 not.
		text := sdktest.Run(t, newPlugin(), cgroupJobsOptions(t, map[string]any{"cgroup_jobs_max_pids": 2})).Text(t)
		sdktest.Contains(t, text,
			`attribution_limit_reached_total{limit="cgroup_jobs_max_pids"} 1`,
			`device_cgroup_job_info{device_kind="rdma",device="rxe0",job_id="77"} 1`,
		)
	})
	t.Run("max series", func(t *testing.T) {
		text := sdktest.Run(t, newPlugin(), cgroupJobsOptions(t, map[string]any{"cgroup_jobs_max_series": 2})).Text(t)
		sdktest.Contains(t, text, `attribution_limit_reached_total{limit="cgroup_jobs_max_series"} 1`)
		if n := strings.Count(text, "device_cgroup_job_info{"); n != 2 {
			t.Errorf("%d device_cgroup_job_info series, want the cap of 2", n)
		}
	})
}

// flakyProcfs wraps the real reads to make a process's fds vanish or be
// refused at a chosen moment of the scan.
type flakyProcfs struct {
	osProcfs
	listed func(dir string) // called after each directory listing
	refuse string           // a directory whose listing fails with EACCES
}

func (f flakyProcfs) ReadDirNames(dir string, max int) ([]string, error) {
	if dir == f.refuse {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: syscall.EACCES}
	}
	names, err := f.osProcfs.ReadDirNames(dir, max)
	if f.listed != nil {
		f.listed(dir)
	}
	return names, err
}

// TestCgroupJobsProcessesVanish: fds closed and a whole process exiting
// between the listing of its fds and their links are skipped without an
// error; what was read before stays.
func TestCgroupJobsProcessesVanish(t *testing.T) {
	opts := cgroupJobsOptions(t, nil)
	p := newPlugin()
	p.proc = flakyProcfs{listed: func(dir string) {
		switch dir {
		case filepath.Join(opts.Procfs, "100", "fd"):
			// fd 3 (uverbs0) is closed once the fds are listed.
			os.Remove(filepath.Join(opts.Procfs, "100", "fd", "3"))
		case filepath.Join(opts.Procfs, "101", "fd"):
			os.RemoveAll(filepath.Join(opts.Procfs, "101")) // process 101 exits
		}
	}}
	res := sdktest.Run(t, p, opts)
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v, errors %v: a vanished process or fd is no error", res.Status, res.Errors)
	}
	text := res.Text(t)
	sdktest.Contains(t, text,
		`device_cgroup_job_info{device_kind="nvme",device="nvme0",job_id="4242"} 1`,
		// 103 holds uverbs0 too.
		`device_cgroup_job_info{device_kind="rdma",device="mlx5_2",job_id="4242"} 1`,
		`attribution_unreadable_fd_dirs_total 0`,
		`attribution_collection_errors_total{collector="cgroup_jobs"} 0`,
	)
	sdktest.Lacks(t, text, `job_id="77"`)
}

// TestCgroupJobsUnreadable: a job process whose fd directory is refused
// is counted and reported, naming the directory; the others still count.
func TestCgroupJobsUnreadable(t *testing.T) {
	opts := cgroupJobsOptions(t, nil)
	p := newPlugin()
	p.proc = flakyProcfs{refuse: filepath.Join(opts.Procfs, "101", "fd")}
	c := sdktest.Client(t, p, opts)
	var res *sdktest.Result
	for range 2 {
		res = sdktest.Collect(t, c, 0)
	}
	text := res.Text(t)
	sdktest.Contains(t, text,
		`device_cgroup_job_info{device_kind="rdma",device="mlx5_2",job_id="4242"} 1`,
		`attribution_unreadable_fd_dirs_total 2`,
		`attribution_collection_errors_total{collector="cgroup_jobs"} 2`,
	)
	sdktest.Lacks(t, text, `job_id="77"`)
	want := "1 of 4 processes of Slurm jobs: their devices are not known (read " + filepath.Join(opts.Procfs, "101", "fd") + ": open " + filepath.Join(opts.Procfs, "101", "fd") + ": permission denied): reading other users' fds needs CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, and no Landlock sandbox (README.md, What it needs)"
	if len(res.Errors) != 1 || res.Errors[0].Message != want {
		t.Errorf("errors %+v, want one saying %q", res.Errors, want)
	}
}

// refusingCgroups fails every read of one process's cgroup file.
type refusingCgroups struct {
	osProcfs
	path string
}

func (r refusingCgroups) ReadFile(path string, max int) ([]byte, error) {
	if path == r.path {
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	return r.osProcfs.ReadFile(path, max)
}

// TestCgroupJobsCgroupUnreadable: a process whose cgroup file is refused
// (procfs mounted hidepid, a sandbox without {procfs}) is an error naming
// it, not a process silently in no job.
func TestCgroupJobsCgroupUnreadable(t *testing.T) {
	opts := cgroupJobsOptions(t, nil)
	p := newPlugin()
	cg := filepath.Join(opts.Procfs, "101", "cgroup")
	p.proc = refusingCgroups{path: cg}
	res := sdktest.Run(t, p, opts)
	sdktest.Contains(t, res.Text(t),
		`device_cgroup_job_info{device_kind="rdma",device="mlx5_2",job_id="4242"} 1`,
		`attribution_collection_errors_total{collector="cgroup_jobs"} 1`,
		`attribution_unreadable_fd_dirs_total 0`,
	)
	want := "1 of 6 processes: their cgroup is not known (open " + cg + ": permission denied)"
	if len(res.Errors) != 1 || res.Errors[0].Message != want {
		t.Errorf("errors %+v, want one saying %q", res.Errors, want)
	}
}
