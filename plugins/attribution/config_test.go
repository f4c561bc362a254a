package main

import (
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConfigureErrors: each bad setting is refused with a message that
// names its key and says what is wrong.
func TestConfigureErrors(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"pod_resource_socket": "/x"}, Key: "pod_resource_socket", Detail: "unknown key"},
		{Raw: map[string]any{"pod_resources_socket": "kubelet.sock"}, Key: "pod_resources_socket: ", Detail: "not an absolute path"},
		{Raw: map[string]any{"pod_resources_socket": 7}, Key: "pod_resources_socket", Detail: ": got "},
		{Raw: map[string]any{"cache_ttl": "100ms"}, Key: "cache_ttl: ", Detail: "below the minimum of 1s"},
		{Raw: map[string]any{"cache_ttl": "soon"}, Key: "cache_ttl: ", Detail: "invalid duration"},
		{Raw: map[string]any{"call_timeout": "0s"}, Key: "call_timeout: ", Detail: "must be positive"},
		{Raw: map[string]any{"call_timeout": "30s"}, Key: "call_timeout: ", Detail: "longer than cache_ttl"},
		{Raw: map[string]any{"job_mapping_dir": "job-mapping"}, Key: "job_mapping_dir: ", Detail: "not an absolute path"},
		{Raw: map[string]any{"cgroup_jobs": "yes"}, Key: "cgroup_jobs", Detail: ": got "},
		{Raw: map[string]any{"cgroup_jobs_max_pids": 0}, Key: "cgroup_jobs_max_pids: ", Detail: "not a positive number"},
		{Raw: map[string]any{"cgroup_jobs_max_series": -1}, Key: "cgroup_jobs_max_series: ", Detail: "not a positive number"},
		{Raw: map[string]any{"rdma_qp_owners_max_series": 0}, Key: "rdma_qp_owners_max_series: ", Detail: "not a positive number"},
	})
}

// TestConfigureAcceptsDocumentedKeys sets every key of the README's table
// and checks where each lands.
func TestConfigureAcceptsDocumentedKeys(t *testing.T) {
	p := newPlugin()
	err := sdktest.Configure(t, p, map[string]any{
		"pod_resources_socket": "/run/kubelet/pod-resources.sock",
		"cache_ttl":            "30s",
		"call_timeout":         5,
		"job_mapping_dir":      "/var/lib/plexporter/job-mapping",

		"cgroup_jobs":               true,
		"cgroup_jobs_max_pids":      100,
		"cgroup_jobs_max_series":    10,
		"rdma_qp_owners":            true,
		"rdma_qp_owners_max_series": 20,
	}, sdk.Paths{Rootfs: "/host/root", Procfs: "/host/proc"})
	if err != nil {
		t.Fatal(err)
	}
	if pr := p.pods; pr == nil || pr.socket != "/host/root/run/kubelet/pod-resources.sock" || pr.ttl != 30*time.Second || pr.timeout != 5*time.Second {
		t.Errorf("pod resources %+v", pr)
	}
	if p.jobMapping != "/host/root/var/lib/plexporter/job-mapping" {
		t.Errorf("job mapping dir %q", p.jobMapping)
	}
	if c := p.cgroupJobs; c == nil || *c != (cgroupJobs{procfs: "/host/proc", maxPids: 100, maxSeries: 10}) {
		t.Errorf("cgroup jobs %+v", c)
	}
	if q := p.qpOwners; q == nil || q.procfs != "/host/proc" || q.maxSeries != 20 || q.dial == nil {
		t.Errorf("rdma qp owners %+v", q)
	}
}

// TestConfigureDefaults: the kubelet's default socket under the rootfs,
// 10 s cache, Slurm off; an empty socket turns Kubernetes off.
func TestConfigureDefaults(t *testing.T) {
	p := newPlugin()
	if err := sdktest.Configure(t, p, nil, sdk.Paths{Rootfs: "/host/root"}); err != nil {
		t.Fatal(err)
	}
	if pr := p.pods; pr == nil || pr.socket != "/host/root/var/lib/kubelet/pod-resources/kubelet.sock" || pr.ttl != 10*time.Second || pr.timeout != 2*time.Second {
		t.Errorf("pod resources %+v", pr)
	}
	if p.jobMapping != "" {
		t.Errorf("job mapping on by default: %q", p.jobMapping)
	}
	if p.cgroupJobs != nil || p.qpOwners != nil {
		t.Errorf("cgroup_jobs or rdma_qp_owners on by default: %+v %+v", p.cgroupJobs, p.qpOwners)
	}
	if err := sdktest.Configure(t, p, map[string]any{"pod_resources_socket": ""}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	if p.pods != nil {
		t.Error("pod_resources_socket \"\" leaves Kubernetes attribution on")
	}
}
