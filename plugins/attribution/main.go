// Command plexporter-attribution is the plexporter plugin that says who
// uses a device: info series joining the devices other plugins report
// (PCI functions, RDMA devices, netdevs, NVMe controllers) to the
// Kubernetes pods the kubelet's pod-resources API allocated them to, and
// to the Slurm jobs a job-mapping directory names. The join itself is left
// to PromQL. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }
