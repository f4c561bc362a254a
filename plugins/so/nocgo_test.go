//go:build !cgo

package main

import (
	"testing"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestWithoutCgoRefusesLibraries(t *testing.T) {
	sdktest.Refuses(t, newPlugin, sdk.Paths{}, []sdktest.Refusal{
		{Raw: map[string]any{"library": "/usr/local/lib/plexporter/collectors/x.so"}, Key: "library", Detail: "built without cgo (CGO_ENABLED=0) and cannot load shared objects"},
	})
}
