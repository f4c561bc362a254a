package main

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"
)

// owner is what a process's cgroup says it belongs to: a Slurm job, a
// Kubernetes pod, both or neither.
type owner struct {
	JobID  string // the Slurm job id, "" when the process is in no job's cgroup
	PodUID string // the pod's UID as the kubelet writes it (dashes), "" outside kubepods
}

func (o owner) known() bool { return o.JobID != "" || o.PodUID != "" }

// slurmJobCgroup matches the job component of the cgroup paths Slurm's
// cgroup plugins create for the steps of a job:
//
//   - cgroup v1 (proctrack/task cgroup, every controller):
//     /slurm/uid_<uid>/job_<id>/step_<step>/task_<n>, where the first
//     component is slurm_<nodename> on a node running several slurmd;
//   - cgroup v2 (Slurm 22.05+): /system.slice/slurmstepd.scope/job_<id>/step_<step>/…
//     (the scope under slurmd's own unit when slurmd is not a system unit),
//     and the v1-style /slurm/uid_<uid>/job_<id> that older v2 setups use.
//
// The job id in the path is the numeric SLURM_JOB_ID (an array task has
// its own), so it is what prolog scripts write into mapping files too.
var slurmJobCgroup = regexp.MustCompile(`(?:/slurmstepd\.scope|/slurm[^/]*/uid_[0-9]+)/job_([0-9]+)(?:/|$)`)

// kubePodCgroup matches the pod component of the kubelet's cgroup paths:
// the cgroupfs driver's /kubepods/<qos>/pod<uid>/<container> and the
// systemd driver's /kubepods.slice/…/kubepods-<qos>-pod<uid>.slice/…,
// where the UID's dashes are underscores.
var kubePodCgroup = regexp.MustCompile(`/kubepods[^/]*(?:/[^/]+)*?/(?:[^/]*-)?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)`)

// parseCgroup reads /proc/<pid>/cgroup, in either layout: cgroup v1's
// "<id>:<controllers>:<path>" lines (the job may show in any controller's
// line: a node may mount only some controllers, and Slurm's plugins put
// the job into the ones they use) and cgroup v2's single "0::<path>" line;
// a hybrid node has both. The first line naming a job (or pod) wins: a
// process is in one job.
func parseCgroup(data []byte) owner {
	var o owner
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if o.JobID == "" {
			if m := slurmJobCgroup.FindStringSubmatch(path); m != nil {
				o.JobID = m[1]
			}
		}
		if o.PodUID == "" {
			if m := kubePodCgroup.FindStringSubmatch(path); m != nil {
				o.PodUID = strings.ReplaceAll(m[1], "_", "-")
			}
		}
	}
	return o
}
