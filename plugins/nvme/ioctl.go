package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// adminDevice is an open NVMe controller character device (/dev/nvmeN)
// that can run admin commands. The real one issues NVME_IOCTL_ADMIN_CMD;
// tests use a fake.
type adminDevice interface {
	// GetLogPage runs Get Log Page for log identifier lid and namespace
	// nsid, filling buf (a whole number of dwords).
	GetLogPage(ctx context.Context, lid uint8, nsid uint32, buf []byte) error
	Close() error
}

// openFunc opens the controller character device at path.
type openFunc func(path string) (adminDevice, error)

const (
	logIDSMART     = 0x02
	nsidController = 0xFFFFFFFF // controller-wide (all namespaces)
)

// nvmeStatusError is a non-zero NVMe completion status returned by the
// controller (the ioctl itself succeeded).
type nvmeStatusError uint32

func (e nvmeStatusError) Error() string {
	return fmt.Sprintf("NVMe status 0x%x (SCT %d, SC 0x%02x)", uint32(e), (uint32(e)>>8)&0x7, uint32(e)&0xff)
}

// readSMART opens path, reads the SMART / Health log page and decodes it.
func readSMART(ctx context.Context, open openFunc, path string) (*smartLog, error) {
	dev, err := open(path)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	buf := make([]byte, smartLogSize)
	if err := dev.GetLogPage(ctx, logIDSMART, nsidController, buf); err != nil {
		return nil, fmt.Errorf("%s: get log page 0x02: %w", path, err)
	}
	return parseSMARTLog(buf)
}

// isPermission reports whether err means the plugin lacks the privilege
// (CAP_SYS_ADMIN, or access to the device node) rather than a device fault.
func isPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}
