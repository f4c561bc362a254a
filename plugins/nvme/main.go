//go:build !demo

// Command plexporter-nvme is the plexporter plugin for NVMe controllers:
// identity from sysfs on every scrape, and the SMART/Health log read in the
// background through the admin passthrough ioctl. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }
