package sdk_test

import (
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func configWith(t *testing.T, m map[string]any) sdk.Config {
	t.Helper()
	return sdktest.Config(t, m, sdk.Paths{})
}

// Config.Decode's errors begin with the key they are about, as the package
// documentation tells plugin authors theirs should: not with json's words.
func TestDecodeErrorsStartWithTheKey(t *testing.T) {
	type section struct {
		Library  string       `json:"library"`
		Interval sdk.Duration `json:"interval"`
		Limits   struct {
			Max int `json:"max"`
		} `json:"limits"`
		Devices []string `json:"devices"`
	}
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"libary": "/x.so"}, "libary: unknown key (the keys of this section are devices, interval, library, limits)"},
		{map[string]any{"library": 3}, "library: got a number, want a string"},
		{map[string]any{"limits": map[string]any{"max": "many"}}, "limits.max: got a string, want an integer"},
		{map[string]any{"devices": "nvme0"}, "devices: got a string, want a list"},
		{map[string]any{"limits": map[string]any{"max": 1.5}}, "limits.max: got 1.5, want an integer"},
	} {
		var s section
		err := configWith(t, c.cfg).Decode(&s)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
