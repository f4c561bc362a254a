package supervise

import (
	"testing"

	"github.com/plexporter/plexporter/sdk/transport"
)

// The host tells every plugin the protocol version it implements (1.2.0
// and later), so that a plugin can leave out what an older host would drop.
func TestConfigureRequestCarriesTheHostsVersion(t *testing.T) {
	if got := (Settings{}).ConfigureRequest().GetHostApiVersion(); got != transport.APIVersion {
		t.Fatalf("host_api_version %q, want %q", got, transport.APIVersion)
	}
}

// The host's --device.include and --device.exclude reach every plugin, so
// that a plugin leaves a rejected device untouched (fields 7 and 8).
func TestConfigureRequestCarriesTheDeviceFilter(t *testing.T) {
	req := (Settings{DeviceInclude: "^mlx5_", DeviceExclude: "^mlx5_bond_0$"}).ConfigureRequest()
	if req.GetDeviceInclude() != "^mlx5_" || req.GetDeviceExclude() != "^mlx5_bond_0$" {
		t.Fatalf("device_include %q, device_exclude %q", req.GetDeviceInclude(), req.GetDeviceExclude())
	}
}
