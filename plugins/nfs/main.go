// Command plexporter-nfs is the plexporter plugin for NFS client health per
// volume, per transport lane and per socket, from mountstats and the TCP
// socket tables of the same network namespace. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }
