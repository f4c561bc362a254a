package main

import "github.com/plexporter/plexporter/sdk"

// Kubernetes (the kubelet's pod-resources API, cached for cache_ttl).
var (
	descDevicePod = sdk.NewDesc("device_pod_info", sdk.Gauge,
		"A device allocated to a Kubernetes container by the kubelet (pod-resources List); always 1. device_kind is pci, rdma, netdev or nvme when sysfs knows the device ID, other when it does not; a PCI function also gives one series per RDMA device, netdev and NVMe controller behind it, so device joins on what the other plugins report.",
		"device_kind", "device", "pci_address", "resource", "namespace", "pod", "container")
	descDeviceAllocatable = sdk.NewDesc("device_allocatable_info", sdk.Gauge,
		"A device the kubelet can allocate to pods (pod-resources GetAllocatableResources); always 1. Labels as device_pod_info's.",
		"device_kind", "device", "pci_address", "resource")
)

// Slurm.
var descDeviceJob = sdk.NewDesc("device_job_info", sdk.Gauge,
	"A Slurm job using a device, from the job-mapping directory (a file named after the device, one job id per line); always 1.",
	"device", "job_id")

// Slurm jobs from the cgroups of the processes holding a device open
// (cgroup_jobs). A family of its own, not more labels on device_job_info:
// the mapping directory's series keep their labels, and a device both
// sources name would otherwise have two device_job_info series for one
// job, which breaks group_left joins.
var descDeviceCgroupJob = sdk.NewDesc("device_cgroup_job_info", sdk.Gauge,
	"A Slurm job one of whose processes holds the device open, from /proc/<pid>/fd and the job id in /proc/<pid>/cgroup; always 1. device_kind is rdma (a uverbs device) or nvme (a controller or one of its namespaces).",
	"device_kind", "device", "job_id")

// RDMA queue pair owners (rdma_qp_owners), from RDMA netlink resource
// tracking (RDMA_NLDEV_CMD_RES_QP_GET) and the owning processes' cgroups.
var (
	descRDMAQPOwner = sdk.NewDesc("rdma_qp_owner_info", sdk.Gauge,
		"An owner of RDMA queue pairs on a port: the Slurm job and/or Kubernetes pod (its UID) of the processes that created them, from RDMA netlink resource tracking and /proc/<pid>/cgroup; always 1. Queue pairs of processes in neither, and the kernel's own, have no series.",
		"device", "port", "job_id", "pod_uid")
	descRDMAQPOwnerQPs = sdk.NewDesc("rdma_qp_owner_queue_pairs", sdk.Gauge,
		"The RDMA queue pairs an owner of rdma_qp_owner_info holds on the port at this scrape.",
		"device", "port", "job_id", "pod_uid")
)

// Plugin health: the project's error-counter convention. The help text
// predates the cgroup_jobs and rdma_qp_owners collectors (README.md lists
// them) and is kept as it was: the shipped goldens and scrapes compare it.
var descCollectionErrors = sdk.NewDesc("attribution_collection_errors_total", sdk.Counter,
	"Failures since the plugin started, by collector: pod_resources (the kubelet's List), allocatable (its GetAllocatableResources), job_mapping (the Slurm job-mapping directory).",
	"collector")

var (
	descLimitReached = sdk.NewDesc("attribution_limit_reached_total", sdk.Counter,
		"Scrapes since the plugin started at which a bound cut the output short, by limit: cgroup_jobs_max_pids (processes not looked at), cgroup_jobs_max_series and rdma_qp_owners_max_series (series not written), fds_per_process (a process's fds beyond 16384 not read).",
		"limit")
	descUnreadableFDDirs = sdk.NewDesc("attribution_unreadable_fd_dirs_total", sdk.Counter,
		"Processes of Slurm jobs whose /proc/<pid>/fd could not be read, summed over scrapes since the plugin started: their devices are missing from device_cgroup_job_info (ptrace-read access is needed; README.md, The sandbox).")
)

// Collector names: the collector label of attribution_collection_errors_total
// and of the partial errors sent to the host.
const (
	collectorPodResources = "pod_resources"
	collectorAllocatable  = "allocatable"
	collectorJobMapping   = "job_mapping"
	collectorCgroupJobs   = "cgroup_jobs"
	collectorRDMAQPOwners = "rdma_qp_owners"
)

// Limit names: the limit label of attribution_limit_reached_total, the
// configuration key of each bound where it has one.
const (
	limitMaxPids       = "cgroup_jobs_max_pids"
	limitCgroupSeries  = "cgroup_jobs_max_series"
	limitFDsPerProcess = "fds_per_process"
	limitQPOwnerSeries = "rdma_qp_owners_max_series"
)

// catalogue is every family the plugin writes, returned by Info.
var catalogue = []*sdk.Desc{
	descDevicePod, descDeviceAllocatable, descDeviceJob, descDeviceCgroupJob,
	descRDMAQPOwner, descRDMAQPOwnerQPs,
	descCollectionErrors, descLimitReached, descUnreadableFDDirs,
}
