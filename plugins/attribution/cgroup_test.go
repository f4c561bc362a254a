package main

import "testing"

func TestParseCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       owner
	}{
		{"v1 slurm, job in every controller", "12:memory:/slurm/uid_1000/job_4242/step_0/task_0\n11:devices:/slurm/uid_1000/job_4242/step_0\n1:name=systemd:/system.slice/slurmd.service\n", owner{JobID: "4242"}},
		{"v1 slurm, job only in freezer", "5:cpuset:/\n4:freezer:/slurm/uid_0/job_77/step_batch\n0::/\n", owner{JobID: "77"}},
		{"v1 several slurmd per node", "4:freezer:/slurm_node12/uid_1000/job_9/step_extern\n", owner{JobID: "9"}},
		{"v2 slurmstepd scope", "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n", owner{JobID: "4242"}},
		{"v2 slurmstepd scope, the job itself", "0::/system.slice/slurmstepd.scope/job_31\n", owner{JobID: "31"}},
		{"v2 old slurm form", "0::/slurm/uid_1000/job_12/step_1\n", owner{JobID: "12"}},
		{"v2 not slurm", "0::/user.slice/user-1000.slice/job_12/x\n", owner{}},
		{"v2 job_ without a number", "0::/system.slice/slurmstepd.scope/job_x/step_0\n", owner{}},
		{"v2 job_ prefix of a longer name", "0::/system.slice/slurmstepd.scope/job_12x\n", owner{}},
		{"v2 slurmd itself", "0::/system.slice/slurmstepd.scope/system\n", owner{}},
		{"kubelet cgroupfs", "0::/kubepods/burstable/pod8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70/0123abcd\n", owner{PodUID: "8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70"}},
		{"kubelet systemd driver", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8f3a6c1e_0b2d_4c5e_9f1a_2b3c4d5e6f70.slice/cri-containerd-0123.scope\n", owner{PodUID: "8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70"}},
		{"kubelet guaranteed, systemd", "0::/kubepods.slice/kubepods-pod8f3a6c1e_0b2d_4c5e_9f1a_2b3c4d5e6f70.slice/cri-containerd-0123.scope\n", owner{PodUID: "8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70"}},
		{"v1 kubelet in a controller line", "3:memory:/kubepods/pod8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70/abc\n", owner{PodUID: "8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70"}},
		{"pod-like name outside kubepods", "0::/system.slice/pod8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70\n", owner{}},
		{"garbage", "not a cgroup file\n::\n", owner{}},
		{"empty", "", owner{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseCgroup([]byte(tc.file)); got != tc.want {
				t.Errorf("parseCgroup(%q) = %+v, want %+v", tc.file, got, tc.want)
			}
		})
	}
}

func FuzzParseCgroup(f *testing.F) {
	f.Add([]byte("0::/system.slice/slurmstepd.scope/job_4242/step_0\n"))
	f.Add([]byte("4:freezer:/slurm/uid_0/job_77/step_batch\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := parseCgroup(data)
		if o.JobID != "" && !jobID.MatchString(o.JobID) {
			t.Errorf("job id %q is not a Slurm job id", o.JobID)
		}
	})
}
