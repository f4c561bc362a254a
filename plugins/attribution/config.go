package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

const (
	// defaultPodResourcesSocket is where the kubelet serves the
	// pod-resources API (its --pod-resources-directory default).
	defaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	// defaultCacheTTL bounds the load on the kubelet: the API's design
	// notes warn that List walks every pod of the node.
	defaultCacheTTL = 10 * time.Second
	// minimumCacheTTL keeps a typo ("10ms") from turning every scrape of
	// every Prometheus replica into a List.
	minimumCacheTTL = time.Second
	// defaultCallTimeout is the deadline of one refresh (List and
	// GetAllocatableResources): a kubelet that hangs costs a scrape this
	// long at most, never the host's whole deadline.
	defaultCallTimeout = 2 * time.Second
	// maxJobIDsPerFile bounds what one mapping file may add; a device is
	// shared by a handful of jobs at most.
	maxJobIDsPerFile = 64
	// defaultMaxPids bounds the processes one cgroup_jobs scan looks at:
	// one small read each (/proc/<pid>/cgroup), far more than a compute
	// node runs.
	defaultMaxPids = 16384
	// defaultMaxSeries bounds the series of device_cgroup_job_info and of
	// rdma_qp_owner_info each: a device is used by a handful of jobs, a
	// port's queues by a handful of owners.
	defaultMaxSeries = 1024
)

// config is the plugin's section of the host configuration
// (plugins.attribution.config); the json tags are its keys.
type config struct {
	// PodResourcesSocket is the kubelet's pod-resources socket, a path on
	// the node read under --path.rootfs; "" turns Kubernetes attribution
	// off (a Slurm node). Unset means defaultPodResourcesSocket.
	PodResourcesSocket *string `json:"pod_resources_socket"`
	// CacheTTL is how long one answer of the kubelet serves scrapes: at
	// most one List per TTL, whatever the scrape rate.
	CacheTTL sdk.Duration `json:"cache_ttl"`
	// CallTimeout is the deadline of one refresh from the kubelet.
	CallTimeout sdk.Duration `json:"call_timeout"`
	// JobMappingDir is the Slurm job-mapping directory (one file per
	// device, one job id per line), a path on the node read under
	// --path.rootfs; "" (the default) turns it off.
	JobMappingDir string `json:"job_mapping_dir"`
	// CgroupJobs turns on device_cgroup_job_info: the Slurm jobs whose
	// processes hold a device open, from /proc/<pid>/fd and
	// /proc/<pid>/cgroup under --path.procfs.
	CgroupJobs bool `json:"cgroup_jobs"`
	// CgroupJobsMaxPids is how many processes one scan looks at at most.
	CgroupJobsMaxPids int `json:"cgroup_jobs_max_pids"`
	// CgroupJobsMaxSeries caps device_cgroup_job_info.
	CgroupJobsMaxSeries int `json:"cgroup_jobs_max_series"`
	// RDMAQPOwners turns on rdma_qp_owner_info: the owners of RDMA queue
	// pairs from RDMA netlink resource tracking, joined with their
	// processes' cgroups.
	RDMAQPOwners bool `json:"rdma_qp_owners"`
	// RDMAQPOwnersMaxSeries caps rdma_qp_owner_info (and
	// rdma_qp_owner_queue_pairs, which has the same series).
	RDMAQPOwnersMaxSeries int `json:"rdma_qp_owners_max_series"`
}

func defaultConfig() config {
	return config{
		CacheTTL:    sdk.Duration{Duration: defaultCacheTTL},
		CallTimeout: sdk.Duration{Duration: defaultCallTimeout},

		CgroupJobsMaxPids:     defaultMaxPids,
		CgroupJobsMaxSeries:   defaultMaxSeries,
		RDMAQPOwnersMaxSeries: defaultMaxSeries,
	}
}

// validate checks the settings, naming the key of the first bad one
// (Config.Decode has refused durations that do not parse).
func (c *config) validate() error {
	if s := c.PodResourcesSocket; s != nil && *s != "" && !filepath.IsAbs(*s) {
		return fmt.Errorf("pod_resources_socket: %q is not an absolute path (a path on the node, read under --path.rootfs)", *s)
	}
	if ttl := c.CacheTTL.Duration; ttl < minimumCacheTTL {
		return fmt.Errorf("cache_ttl: %s is below the minimum of %s", ttl, minimumCacheTTL)
	}
	if to := c.CallTimeout.Duration; to <= 0 {
		return errors.New("call_timeout: must be positive")
	} else if to > c.CacheTTL.Duration {
		return fmt.Errorf("call_timeout: %s is longer than cache_ttl (%s): a refresh would still run when the next is due", to, c.CacheTTL.Duration)
	}
	if d := c.JobMappingDir; d != "" && !filepath.IsAbs(d) {
		return fmt.Errorf("job_mapping_dir: %q is not an absolute path (a path on the node, read under --path.rootfs)", d)
	}
	for _, bound := range []struct {
		key string
		n   int
	}{{"cgroup_jobs_max_pids", c.CgroupJobsMaxPids}, {"cgroup_jobs_max_series", c.CgroupJobsMaxSeries}, {"rdma_qp_owners_max_series", c.RDMAQPOwnersMaxSeries}} {
		if bound.n < 1 {
			return fmt.Errorf("%s: %d is not a positive number", bound.key, bound.n)
		}
	}
	return nil
}

// socket returns the configured socket path on the node, "" when
// Kubernetes attribution is off.
func (c *config) socket() string {
	if c.PodResourcesSocket == nil {
		return defaultPodResourcesSocket
	}
	return *c.PodResourcesSocket
}

// underRoot returns the node path p as the plugin sees it under rootfs
// ("" stays "": the source is off).
func underRoot(rootfs, p string) string {
	if p == "" {
		return ""
	}
	return filepath.Join(rootfs, p)
}
