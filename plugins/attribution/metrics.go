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

// Plugin health: the project's error-counter convention.
var descCollectionErrors = sdk.NewDesc("attribution_collection_errors_total", sdk.Counter,
	"Failures since the plugin started, by collector: pod_resources (the kubelet's List), allocatable (its GetAllocatableResources), job_mapping (the Slurm job-mapping directory).",
	"collector")

// Collector names: the collector label of attribution_collection_errors_total
// and of the partial errors sent to the host.
const (
	collectorPodResources = "pod_resources"
	collectorAllocatable  = "allocatable"
	collectorJobMapping   = "job_mapping"
)

// catalogue is every family the plugin writes, returned by Info.
var catalogue = []*sdk.Desc{descDevicePod, descDeviceAllocatable, descDeviceJob, descCollectionErrors}
