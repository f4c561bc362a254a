//go:build !demo

package main

import (
	"fmt"

	"github.com/plexporter/plexporter/sdk"
)

// shipped is the plugin as its binary runs it: confined by its seccomp
// filter (confine_linux.go) from the process's start, before it talks to
// the host. Tests in this package run the plugin in the test process and
// use newPlugin unconfined. A filter that cannot be installed stops the
// plugin at Configure with the reason: it does not run with CAP_SYS_ADMIN
// unconfined.
func shipped() sdk.Plugin {
	p := newPlugin()
	if err := confineShipped(); err != nil {
		p.confineErr = fmt.Errorf("cannot confine the plugin's system calls (%w); it does not run with CAP_SYS_ADMIN without that filter: run it on amd64 or arm64 with a kernel that has seccomp filters (CONFIG_SECCOMP_FILTER)", err)
	}
	return wrapShipped(p)
}

// confineShipped and wrapShipped are confine and the identity; the
// test-only build tag sealprobe replaces them (sealprobe_linux.go) to let
// the host's test try calls from the real process with the filter on and
// off. The shipped build has no way to leave the filter off.
var (
	confineShipped = confine
	wrapShipped    = func(p *plugin) sdk.Plugin { return p }
)
