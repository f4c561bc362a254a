//go:build sealprobe

package main

// The test-only build of the plugin (go build -tags sealprobe; never
// shipped): the shipped plugin, sealed as shipped, that also reports at
// every collect what privprobe's attempts answered, as
// ebpf_sealprobe_errno{attempt} (0: it succeeded). The host's
// TestEBPFSealedAfterConfigure runs it under the shipped manifest.
// PLEXPORTER_SEALPROBE_OFF=1 (given through the manifest's env) leaves the
// seal off, so the test can show that the attempts succeed without it.

import (
	"context"
	"os"

	"github.com/plexporter/plexporter/plugins/internal/privprobe"
	"github.com/plexporter/plexporter/sdk"
)

var descSealProbe = sdk.NewDesc("ebpf_sealprobe_errno", sdk.Gauge, "Test build only: the errno of each privileged attempt made from the plugin's process at this collect (0: it succeeded).", "attempt")

type sealProbe struct{ *plugin }

func init() {
	wrapShipped = func(p *plugin) sdk.Plugin {
		if os.Getenv("PLEXPORTER_SEALPROBE_OFF") == "1" {
			p.seal = nil
		}
		return sealProbe{p}
	}
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
