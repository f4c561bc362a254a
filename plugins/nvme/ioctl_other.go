//go:build !linux

package main

import (
	"errors"
	"fmt"
)

func openIoctlDevice(path string) (adminDevice, error) {
	return nil, fmt.Errorf("%s: %w", path, errors.ErrUnsupported)
}
