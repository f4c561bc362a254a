//go:build !linux

package main

import (
	"errors"
	"fmt"
)

// errUnsupported is what every admin command fails with off Linux: the
// plugin still builds there (a vendor develops on a laptop), and exports
// identity only.
var errUnsupported = fmt.Errorf("NVMe admin passthrough needs Linux: %w", errors.ErrUnsupported)

func openIoctlDevice(path string) (adminDevice, error) {
	return nil, fmt.Errorf("%s: %w", path, errUnsupported)
}
