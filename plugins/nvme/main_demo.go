//go:build demo

// The demo build of plexporter-nvme (make demo): the plugin unchanged,
// except that the SMART/Health log comes from the captures in testdata/
// instead of the admin passthrough ioctl, which needs a real controller.
// The demo's sysfs (internal/dev/demo/demotree) has the controllers of
// testdata/sysfs.ttar; each gets a page: nvme0 the healthy drive, nvme1 the
// worn-out one, nvme2 (nvme-tcp) the real QEMU capture.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"

	"github.com/plexporter/plexporter/sdk"
)

var (
	//go:embed testdata/healthy.bin
	demoHealthy []byte
	//go:embed testdata/failing.bin
	demoFailing []byte
	//go:embed testdata/qemu.bin
	demoQEMU []byte
)

// demoPages maps a controller to the log page it answers.
var demoPages = map[string][]byte{"nvme0": demoHealthy, "nvme1": demoFailing, "nvme2": demoQEMU}

func main() {
	p := newPlugin()
	p.open = openDemoDevice
	sdk.Serve(p)
}

// openDemoDevice opens a captured controller by its base name (dev_dir is
// not read); one without a capture does not exist.
func openDemoDevice(path string) (adminDevice, error) {
	page, ok := demoPages[filepath.Base(path)]
	if !ok {
		return nil, fmt.Errorf("open %s: no such controller in the demo", path)
	}
	return demoDevice(page), nil
}

type demoDevice []byte

func (d demoDevice) Close() error { return nil }

func (d demoDevice) GetLogPage(_ context.Context, lid uint8, nsid uint32, buf []byte) error {
	if lid != logIDSMART || nsid != nsidController || len(buf) != len(d) {
		return fmt.Errorf("demo: only the SMART/Health log (0x02, all namespaces, %d bytes) was captured", len(d))
	}
	copy(buf, d)
	return nil
}
