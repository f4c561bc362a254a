//go:build sealprobe && !demo

package main

// The test-only build of the plugin (go build -tags sealprobe; never
// shipped): the shipped plugin, confined as shipped, that also reports at
// every collect what privprobe's attempts answered, as
// nvme_sealprobe_errno{attempt} (0: it succeeded). The host's
// TestNVMeConfined runs it under the shipped manifest.
// PLEXPORTER_SEALPROBE_OFF=1 (given through the manifest's env) leaves the
// filter off, so the test can show that the attempts get past it without.

import (
	"context"
	"os"

	"github.com/plexporter/plexporter/plugins/internal/privprobe"
	"github.com/plexporter/plexporter/sdk"
)

var descSealProbe = sdk.NewDesc("nvme_sealprobe_errno", sdk.Gauge, "Test build only: the errno of each privileged attempt made from the plugin's process at this collect (0: it succeeded).", "attempt")

type sealProbe struct{ *plugin }

func init() {
	off := os.Getenv("PLEXPORTER_SEALPROBE_OFF") == "1"
	confineShipped = func() error {
		if off {
			return nil
		}
		return confine()
	}
	wrapShipped = func(p *plugin) sdk.Plugin { return sealProbe{p} }
}

func (s sealProbe) Info() sdk.Info {
	i := s.plugin.Info()
	i.Metrics = append(append([]*sdk.Desc{}, i.Metrics...), descSealProbe)
	return i
}

func (s sealProbe) Collect(ctx context.Context, w *sdk.Writer) error {
	err := s.plugin.Collect(ctx, w)
	for attempt, errno := range privprobe.Try() {
		w.Gauge(descSealProbe, errno, attempt)
	}
	return err
}
