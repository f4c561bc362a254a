// Command plexporter-textfile is the plexporter plugin for node_exporter's
// textfile collector format: it reads the *.prom files that job scripts,
// Slurm prologs and epilogs, cron jobs and vendor tools (NCCL Inspector)
// write into configured directories, checks who may have written them,
// bounds what they may cost, and serves their samples. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }
