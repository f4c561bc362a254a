package main

import (
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestConfig(t *testing.T) {
	if err := sdktest.Configure(t, fakePlugin(nil), map[string]any{"library": "/fake/lib.so", "collector": map[string]any{"a": 1}}, sdk.Paths{}); err != nil {
		t.Fatal(err)
	}
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"library": "lib.so"}, Key: "library", Detail: "not an absolute path"},
		{Raw: map[string]any{"library": "/a/../lib.so"}, Key: "library", Detail: `write "/lib.so"`},
		{Raw: map[string]any{"library": "/a.so", "collector": []any{1}}, Key: "collector", Detail: "must be a mapping"},
		{Raw: map[string]any{"libary": "/a.so"}, Key: "libary", Detail: "unknown key"},
	})
	// A reload in the same process cannot swap the library.
	p := fakePlugin(nil)
	sdktest.Configure(t, p, map[string]any{"library": "/fake/lib.so"}, sdk.Paths{})
	if err := sdktest.Configure(t, p, map[string]any{"library": "/other.so"}, sdk.Paths{}); err == nil || !strings.Contains(err.Error(), "/fake/lib.so is loaded in this process already") {
		t.Errorf("second library: %v", err)
	}
}
