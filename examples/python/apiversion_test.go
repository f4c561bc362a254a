package python

import (
	"os"
	"regexp"
	"testing"

	"github.com/plexporter/plexporter/sdk/transport"
)

// A vendor writes a plugin from this README and the example: both must
// give the protocol's api_version, not an older one (no Python needed).
func TestDocumentedAPIVersionIsTheProtocols(t *testing.T) {
	for file, re := range map[string]string{
		"README.md":            "`api_version` `([0-9.]+)`",
		"plexporter-pyexample": `API_VERSION = "([0-9.]+)"`,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(re).FindAllSubmatch(b, -1)
		if len(m) == 0 {
			t.Errorf("%s: no api_version found (%s)", file, re)
		}
		for _, v := range m {
			if string(v[1]) != transport.APIVersion {
				t.Errorf("%s says api_version %s; the protocol is %s", file, v[1], transport.APIVersion)
			}
		}
	}
}
