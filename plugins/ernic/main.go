// Command plexporter-ernic is the plexporter plugin for AMD's rocm-ernic
// software RDMA NIC: a drop-in for rocm-ernic's ernic-exporter that reads
// the server's run directory (instances.json and the <id>.stats files the
// servers rewrite about once a second) and checks each server's liveness
// in the node's procfs. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }
