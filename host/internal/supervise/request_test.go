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
