package main

import "github.com/plexporter/plexporter/sdk"

// descCollectionErrors counts the collector's partial failures, the
// samples the relay refused and failed collects; collector is the name the
// library declares in its info. Shared, as so_collector_info: every
// instance of plexporter-so (so-<collector>) writes both families, told
// apart by collector, and the host gives a family declared by several
// plugins to the first of them unless each declares it shared.
var descCollectionErrors = sdk.NewDesc("so_collection_errors_total", sdk.Counter,
	"Collection errors of the shared-object collector: partial failures it reported, samples the plugin refused (unknown family, wrong label count or type) and collects that failed or overran their deadline.",
	"collector").WithShared()

// descLibraryFamilies stands for the families the library declares: Info
// is answered before Configure names the library.
var descLibraryFamilies = sdk.NewDesc("*", sdk.Untyped, "The families the collector library declares in plexporter_collector_info (see its documentation).")

// descCollectorInfo shows which collector library runs, and its own
// version: plexporter_plugin_info's version is plexporter-so's build.
var descCollectorInfo = sdk.NewDesc("so_collector_info", sdk.Gauge,
	"The shared-object collector this instance runs: its declared name and its own version (plexporter_collector_info's version; plexporter_plugin_info's version is plexporter-so's build). 1 while a library is loaded.",
	"collector", "version").WithShared()

var catalogue = []*sdk.Desc{descCollectionErrors, descCollectorInfo, descLibraryFamilies}
