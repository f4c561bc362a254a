//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nvmeAdminCmdIoctl is NVME_IOCTL_ADMIN_CMD, _IOWR('N', 0x41, struct
// nvme_passthru_cmd), from the kernel's include/uapi/linux/nvme_ioctl.h.
const nvmeAdminCmdIoctl = 0xC0484E41

const nvmeAdminGetLogPage = 0x02

// passthruCmd mirrors struct nvme_passthru_cmd (72 bytes, no padding).
type passthruCmd struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	Cdw2        uint32
	Cdw3        uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	Cdw10       uint32
	Cdw11       uint32
	Cdw12       uint32
	Cdw13       uint32
	Cdw14       uint32
	Cdw15       uint32
	TimeoutMs   uint32 // 0: the kernel's admin timeout
	Result      uint32
}

var _ [72]byte = [unsafe.Sizeof(passthruCmd{})]byte{}

// getLogPageCmd builds the Get Log Page admin command reading len(buf)
// bytes (a whole number of dwords) of log lid into buf.
func getLogPageCmd(lid uint8, nsid uint32, buf []byte) passthruCmd {
	numd := uint32(len(buf)/4 - 1) // number of dwords, 0's based
	return passthruCmd{
		Opcode:  nvmeAdminGetLogPage,
		NSID:    nsid,
		Addr:    uint64(uintptr(unsafe.Pointer(&buf[0]))),
		DataLen: uint32(len(buf)),
		Cdw10:   (numd&0xffff)<<16 | uint32(lid), // NUMDL, LID
		Cdw11:   numd >> 16,                      // NUMDU
	}
}

type ioctlDevice struct{ f *os.File }

// openIoctlDevice opens the controller character device read-only; the
// kernel checks CAP_SYS_ADMIN per command, not at open.
func openIoctlDevice(path string) (adminDevice, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &ioctlDevice{f: f}, nil
}

func (d *ioctlDevice) Close() error { return d.f.Close() }

// GetLogPage issues Get Log Page through the admin passthrough ioctl. The
// ioctl cannot be interrupted; ctx is only checked before it starts. The
// kernel's admin timeout bounds it.
func (d *ioctlDevice) GetLogPage(ctx context.Context, lid uint8, nsid uint32, buf []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(buf) == 0 || len(buf)%4 != 0 {
		return fmt.Errorf("log page buffer of %d bytes is not a whole number of dwords", len(buf))
	}
	cmd := getLogPageCmd(lid, nsid, buf)
	conn, err := d.f.SyscallConn()
	if err != nil {
		return err
	}
	var status uintptr
	var errno unix.Errno
	if err := conn.Control(func(fd uintptr) {
		status, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, nvmeAdminCmdIoctl, uintptr(unsafe.Pointer(&cmd)))
	}); err != nil {
		return err
	}
	runtime.KeepAlive(buf)
	if errno != 0 {
		return errno
	}
	if status != 0 {
		return nvmeStatusError(status)
	}
	return nil
}
