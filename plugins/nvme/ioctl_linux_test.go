//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestGetLogPageCmd(t *testing.T) {
	if n := unsafe.Sizeof(passthruCmd{}); n != 72 {
		t.Fatalf("struct nvme_passthru_cmd is 72 bytes, ours %d", n)
	}
	buf := make([]byte, 512)
	cmd := getLogPageCmd(logIDSMART, nsidController, buf)
	// Values from the protocol notes: opcode 0x02, NSID 0xFFFFFFFF,
	// CDW10 0x007F0002 for 512 bytes.
	if cmd.Opcode != 0x02 || cmd.NSID != 0xFFFFFFFF || cmd.Cdw10 != 0x007F0002 || cmd.Cdw11 != 0 ||
		cmd.DataLen != 512 || cmd.Addr != uint64(uintptr(unsafe.Pointer(&buf[0]))) {
		t.Fatalf("cmd = %+v", cmd)
	}
	// A page over 256 KiB needs the upper dword count (NUMDU) in CDW11.
	big := make([]byte, 4<<18)
	if c := getLogPageCmd(0x0c, 1, big); c.Cdw10 != 0xFFFF000C || c.Cdw11 != 0x3 {
		t.Fatalf("big cmd cdw10 %#x cdw11 %#x", c.Cdw10, c.Cdw11)
	}
	if nvmeAdminCmdIoctl != 0xC0484E41 {
		t.Fatal("wrong ioctl number")
	}
}

func TestOpenMissingDevice(t *testing.T) {
	_, err := openIoctlDevice(filepath.Join(t.TempDir(), "nvme0"))
	if err == nil || isPermission(err) {
		t.Fatalf("err = %v", err)
	}
}

// TestIoctlPlumbing sends the real ioctl to a character device that is not
// an NVMe controller: the kernel must answer ENOTTY, not crash or succeed.
func TestIoctlPlumbing(t *testing.T) {
	dev, err := openIoctlDevice("/dev/null")
	if err != nil {
		t.Skipf("/dev/null: %v", err)
	}
	defer dev.Close()
	buf := make([]byte, 512)
	if err := dev.GetLogPage(context.Background(), logIDSMART, nsidController, buf); !errors.Is(err, unix.ENOTTY) {
		t.Fatalf("ioctl on /dev/null: %v, want ENOTTY", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := dev.GetLogPage(ctx, logIDSMART, nsidController, buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if err := dev.GetLogPage(context.Background(), logIDSMART, nsidController, buf[:6]); err == nil {
		t.Fatal("buffer of 6 bytes accepted")
	}
}

// TestRealDevice issues the real ioctl on every NVMe controller present.
// Without /dev/nvme* (CI, containers) it skips; without CAP_SYS_ADMIN it
// checks that the failure is classified as a permission problem.
func TestRealDevice(t *testing.T) {
	paths, _ := filepath.Glob("/dev/nvme*")
	controller := regexp.MustCompile(`^nvme[0-9]+$`) // nvme0, not the namespace nvme0n1
	var ctrls []string
	for _, p := range paths {
		if controller.MatchString(filepath.Base(p)) {
			ctrls = append(ctrls, p)
		}
	}
	if len(ctrls) == 0 {
		t.Skip("no /dev/nvmeN controller on this machine")
	}
	for _, path := range ctrls {
		t.Run(filepath.Base(path), func(t *testing.T) {
			l, err := readSMART(context.Background(), openIoctlDevice, path)
			if err != nil {
				if isPermission(err) {
					t.Skipf("no privilege (uid %d): %v", os.Geteuid(), err)
				}
				t.Fatalf("SMART log: %v", err)
			}
			t.Logf("%s: %+v", path, *l)
			if l.CompositeTemperatureK != 0 && (l.CompositeTemperatureK < 200 || l.CompositeTemperatureK > 400) {
				t.Errorf("implausible composite temperature %d K", l.CompositeTemperatureK)
			}
			if l.AvailableSparePct > 100 {
				t.Errorf("available spare %d%% > 100", l.AvailableSparePct)
			}
		})
	}
}
