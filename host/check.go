package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/plexporter/plexporter/host/internal/conformance"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/fleet"
	"github.com/plexporter/plexporter/host/internal/sandbox"
	"github.com/plexporter/plexporter/host/internal/supervise"
	"github.com/plexporter/plexporter/internal/guard"
)

// checkFlags are `plexporter plugin check`'s own.
type checkFlags struct {
	binary  string
	sandbox string
	format  string
}

// checkPlugin implements `plexporter plugin check`: 0 when the plugin
// breaks no rule, 1 when it does, 2 when the check cannot run.
func checkPlugin(f flags, opts fleet.Options, log *slog.Logger) int {
	settings := func(p discover.Plugin, sandboxed bool) (supervise.Settings, []string, error) {
		o := opts
		o.Sandbox = sandboxed
		return fleet.New(o, log).SettingsFor(p)
	}
	rep, err := conformance.Run(conformance.Options{
		Binary:           f.check.binary,
		Sandbox:          conformance.SandboxMode(f.check.sandbox),
		Settings:         settings,
		SandboxWorks:     sandbox.CheckHost,
		MaxLabelValueLen: f.maxLabelLen,
		ReservedPrefixes: guard.HostPrefixes(),
		Log:              log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "plexporter plugin check:", err)
		return 2
	}
	if f.check.format == "json" {
		err = rep.WriteJSON(os.Stdout)
	} else {
		err = rep.WriteText(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "plexporter plugin check:", err)
		return 2
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
