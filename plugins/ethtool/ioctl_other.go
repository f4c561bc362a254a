//go:build !linux

package main

import (
	"context"
	"errors"
)

// errUnsupported: SIOCETHTOOL exists only on Linux. The plugin builds
// elsewhere (a vendor develops on a laptop) and reports every driver
// statistics read as this error.
var errUnsupported = errors.New("driver statistics (SIOCETHTOOL) are only available on Linux")

type ioctlSource struct{}

func newIoctlSource() *ioctlSource { return &ioctlSource{} }

func (*ioctlSource) DriverStats(context.Context, string) (*driverStats, error) {
	return nil, errUnsupported
}
