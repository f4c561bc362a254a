// Package guesterrors declares guest_collection_errors_total, the one family
// two plugins write: guest counts its kernel sources in it, and probe, which
// took guest's active probes over, keeps counting a probe that could not be
// made under collector="probe", the name the family had when the probes were
// guest's, so that dashboards and alerts on it keep working. Both plugins
// declare it from here, shared (sdk.Desc.WithShared), so that the host takes
// either's series and the two catalogue entries cannot differ (a different
// help text would be a conflict that drops the second plugin's series).
package guesterrors

import "github.com/plexporter/plexporter/sdk"

// Name is the family's name.
const Name = "guest_collection_errors_total"

// Desc returns the family's descriptor, marked shared.
func Desc() *sdk.Desc {
	return sdk.NewDesc(Name, sdk.Counter,
		"Failures since the plugin started, by collector: stat, pressure_cpu, pressure_io, pressure_memory, meminfo, diskstats, filesystem (a mount whose statfs failed, timed out or is still blocked), kmsg (the log could not be opened or read, or records were lost to a ring-buffer overflow), probe (a probe could not be made at all: no ICMP socket, the mount table unreadable).",
		"collector").WithShared()
}
