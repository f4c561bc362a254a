package main

import (
	"github.com/plexporter/plexporter/plugins/internal/guesterrors"
	"github.com/plexporter/plexporter/sdk"
)

// Health probes (on probe_interval, from a background goroutine), labels
// probe (icmp, nfs_null, https) and target. The names are the ones these
// families had in the guest plugin (README.md, Names).
var (
	descProbeSuccess = sdk.NewDesc("probe_success", sdk.Gauge,
		"1 if the latest probe of the target succeeded, 0 if it failed (no answer within probe_timeout, refused, an RPC or HTTP error).",
		"probe", "target")
	descProbeDuration = sdk.NewDesc("probe_duration_seconds", sdk.Gauge,
		"How long the latest probe of the target took, failed ones included (a timeout shows as probe_timeout).",
		"probe", "target").WithUnit("seconds")
	descProbeLastRun = sdk.NewDesc("probe_last_run_timestamp_seconds", sdk.Gauge,
		"Unix time the latest probe of the target started.",
		"probe", "target").WithUnit("seconds")
)

// probeDescs are the probe families; when the allowlist disables all of
// them no probe runs.
var probeDescs = []*sdk.Desc{descProbeSuccess, descProbeDuration, descProbeLastRun}

// Plugin health: guest_collection_errors_total{collector="probe"}, the
// family and collector these failures were counted under when the probes
// were guest's, kept (shared with guest) so that alerts on it keep working.
var descCollectionErrors = guesterrors.Desc()

// collectorProbe is the collector label of guest_collection_errors_total
// and of the partial errors sent to the host.
const collectorProbe = "probe"

// catalogue is every family the plugin writes, returned by Info.
var catalogue = []*sdk.Desc{descProbeSuccess, descProbeDuration, descProbeLastRun, descCollectionErrors}
