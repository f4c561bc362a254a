package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/plexporter/plexporter/sdk"
)

// shipped is the plugin as its binary runs it: program loading sealed
// once Configure has loaded and attached the programs (seal_linux.go).
// Tests in this package run the plugin in the test process, which must go
// on loading programs, and use newPlugin unsealed.
func shipped() sdk.Plugin {
	p := newPlugin()
	p.seal = sealProgramLoads
	p.restart = restartProcess
	return wrapShipped(p)
}

// wrapShipped is the identity; the test-only build tag sealprobe replaces
// it (sealprobe_linux.go) to let the host's test try loads from the real
// process. The shipped build has no way to leave the seal off.
var wrapShipped = func(p *plugin) sdk.Plugin { return p }

// errSealed answers a second Configure of a sealed process. The host
// configures a process once (at its start); a new configuration is a new
// process.
var errSealed = errors.New("this process can no longer load BPF programs (sealed after its first configuration): restart the plugin to configure it again")

// restartExitCode is the plugin's exit status when it ends itself so that
// the host starts a fresh process that may load programs (sealLater).
const restartExitCode = 75 // EX_TEMPFAIL

// restartProcess ends the process; the host's supervisor starts it again
// and the new process loads what this one could not.
func restartProcess(reason string) {
	sdkLog("exiting so that the host restarts the plugin", "reason", reason)
	os.Exit(restartExitCode)
}

func sdkLog(msg string, args ...any) { sdk.Logger().Warn(msg, args...) }

// sealLocked seals program loading after Configure's loads. Called with
// p.mu held.
func (p *plugin) sealLocked() error {
	if p.seal == nil || p.sealed {
		return nil
	}
	if err := p.seal(); err != nil {
		return fmt.Errorf("cannot stop this process from loading further BPF programs once set up (%w); the plugin does not run without that restriction: run it on amd64 or arm64 with a kernel that has seccomp filters (CONFIG_SECCOMP_FILTER)", err)
	}
	p.sealed = true
	p.logf("BPF program loading sealed", "detail", "bpf(2) is limited to map access and perf_event_open(2) denied for the rest of this process; programs that must load later (the NFS group at a first NFS mount) are loaded by a restarted process")
	return nil
}
