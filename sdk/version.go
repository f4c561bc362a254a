package sdk

import (
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// BuildVersion is the version a plugin reports in Info: the one the build
// injected into prometheus/common/version (the Makefile sets it from
// `git describe`), else the main module's version when the binary was built
// with `go install module@version`, else "devel". Plugins never hard-code
// their version, so `plexporter_plugin_info{version}` names the build that
// actually runs.
func BuildVersion() string {
	if version.Version != "" {
		return version.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
