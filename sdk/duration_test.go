package sdk_test

import (
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

type durationConfig struct {
	Interval sdk.Duration  `json:"interval"`
	Timeout  *sdk.Duration `json:"timeout"`
	Probes   []struct {
		Every sdk.Duration `json:"every"`
	} `json:"probes"`
	Nested struct {
		Backoff sdk.Duration `json:"backoff"`
	} `json:"nested"`
}

func decodeDurations(t *testing.T, raw map[string]any) (durationConfig, error) {
	t.Helper()
	var c durationConfig
	err := sdktest.Config(t, raw, sdk.Paths{}).Decode(&c)
	return c, err
}

func TestDurationDecodes(t *testing.T) {
	c, err := decodeDurations(t, map[string]any{
		"interval": "1m30s", "timeout": 2.5,
		"probes": []any{map[string]any{"every": "250ms"}},
		"nested": map[string]any{"backoff": 60},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval.Duration != 90*time.Second || c.Timeout.Duration != 2500*time.Millisecond ||
		c.Probes[0].Every.Duration != 250*time.Millisecond || c.Nested.Backoff.Duration != time.Minute {
		t.Fatalf("decoded %+v", c)
	}
}

// A value that is not a duration is refused under its key, quoting it.
func TestDurationErrorsNameTheKeyAndValue(t *testing.T) {
	for _, tc := range []struct {
		raw  map[string]any
		want []string
	}{
		{map[string]any{"interval": "soon"}, []string{"interval: ", `"soon" is not a duration`}},
		{map[string]any{"interval": true}, []string{"interval: ", "true is neither a duration string"}},
		{map[string]any{"timeout": "5 minutes"}, []string{"timeout: ", `"5 minutes"`}},
		{map[string]any{"probes": []any{map[string]any{"every": "1s"}, map[string]any{"every": "x"}}}, []string{"probes[1].every: ", `"x"`}},
		{map[string]any{"nested": map[string]any{"backoff": []any{}}}, []string{"nested.backoff: ", "[]"}},
	} {
		_, err := decodeDurations(t, tc.raw)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want[0]) || !strings.Contains(err.Error(), tc.want[1]) {
			t.Errorf("%v: error %v, want it to start with %q and quote %q", tc.raw, err, tc.want[0], tc.want[1])
		}
	}
}

// An unset Duration keeps the plugin's default.
func TestDurationDefaultKept(t *testing.T) {
	c := durationConfig{Interval: sdk.Duration{Duration: time.Hour}}
	if err := sdktest.Config(t, map[string]any{"nested": map[string]any{}}, sdk.Paths{}).Decode(&c); err != nil || c.Interval.Duration != time.Hour {
		t.Fatalf("interval %v, %v", c.Interval, err)
	}
}
