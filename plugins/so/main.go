// Command plexporter-so is the plexporter plugin that runs one shared-object
// collector: a vendor's C-ABI library (sdk/cabi/plexporter_collector.h),
// loaded with dlopen inside this plugin's own sandboxed process, whose
// samples it relays to the host. A collector that crashes, hangs or leaks
// costs this process only; the host restarts it like any plugin. One
// process loads one library: an operator runs several collectors as several
// plugins, plexporter-so installed under one name per collector. See
// README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() {
	tuneGC()
	sdk.Serve(newPlugin())
}
