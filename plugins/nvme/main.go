//go:build !demo

// Command plexporter-nvme is the plexporter plugin for NVMe controllers:
// identity from sysfs on every scrape, and the SMART/Health log read in the
// background through the admin passthrough ioctl. See README.md.
//
// Unlike most plugins it serves shipped(), not newPlugin(): the plugin
// confined by its seccomp filter from the start (confine.go).
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(shipped()) }
