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
