package sdk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// changingDesc is a plugin whose one family changes its help and labels
// between collects, as textfile's do when the files change.
type changingDesc struct {
	d      *sdk.Desc
	labels []string
}

func (p *changingDesc) Info() sdk.Info {
	return sdk.Info{Name: "changing", Version: "0.0.1", Metrics: []*sdk.Desc{sdk.NewDesc("changing_value", sdk.Gauge, "A value.", "a")}}
}

func (p *changingDesc) Configure(context.Context, sdk.Config) error { return nil }

func (p *changingDesc) Collect(_ context.Context, w *sdk.Writer) error {
	lv := make([]string, len(p.d.Labels))
	for i := range lv {
		lv[i] = "v"
	}
	w.Gauge(p.d, 1, lv...)
	return nil
}

// Serve keeps a plugin's Writer from collect to collect; a Desc the
// plugin changed in between is written as it is now, not as it was at
// its first sample.
func TestChangedDescIsReadAtTheNextCollect(t *testing.T) {
	p := &changingDesc{d: &sdk.Desc{Name: "changing_value", Type: sdk.Gauge, Help: "First help.", Labels: []string{"a"}}}
	c := sdktest.Client(t, p, sdktest.Options{})
	if text := sdktest.Collect(t, c, 0).Text(t); !strings.Contains(text, "# HELP changing_value First help.") || !strings.Contains(text, `changing_value{a="v"} 1`) {
		t.Fatalf("first collect:\n%s", text)
	}
	p.d.Help, p.d.Labels = "Second help.", []string{"a", "b"}
	text := sdktest.Collect(t, c, 0).Text(t)
	if !strings.Contains(text, "# HELP changing_value Second help.") || !strings.Contains(text, `changing_value{a="v",b="v"} 1`) {
		t.Fatalf("second collect, after the Desc changed:\n%s", text)
	}
}
