package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// checkRDMADeviceReadded removes rxe0 and adds it again, scraping after
// each step: the plugin lists the directories below a device only when
// their fstat changes (sysfs.Dir.RefreshIfChanged), which on sysfs follows
// subdirectories, not files; a device the kernel unregisters and
// registers again must still vanish and come back whole, with every
// hw_counters/ file of the new device a series. It runs last: the device
// it leaves behind is a new rxe0 on the same netdev.
func checkRDMADeviceReadded(l *lab) error {
	if _, err := os.Stat(hwDir); err != nil {
		return fmt.Errorf("%w (rdma link add failed? see out/guest.log)", err)
	}
	if _, err := l.s.scrape(); err != nil { // the held state of the device as it is now
		return err
	}
	if _, err := run("rdma", "link", "delete", rxeDevice); err != nil {
		return err
	}
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	var errs []error
	if s := e.series("rdma_port_info", "device", rxeDevice); len(s) != 0 {
		errs = append(errs, fmt.Errorf("%d rdma_port_info series for %s after rdma link delete, want none", len(s), rxeDevice))
	}
	if _, err := run("rdma", "link", "add", rxeDevice, "type", "rxe", "netdev", rxeNetdev); err != nil {
		return errors.Join(append(errs, err)...)
	}
	// The new device's port comes up within moments (under TCG on a
	// loaded machine, more); its files exist at once.
	deadline := time.Now().Add(120 * time.Second)
	for {
		e, err = l.s.scrape()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if len(e.series("rdma_port_info", "device", rxeDevice, "port", rxePort)) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := e.series("rdma_port_info", "device", rxeDevice, "port", rxePort); len(s) != 1 {
		errs = append(errs, fmt.Errorf("%d rdma_port_info series for the re-added %s, want 1", len(s), rxeDevice))
	}
	entries, err := os.ReadDir(hwDir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	missing := 0
	for _, f := range entries {
		if f.Name() == "lifespan" {
			continue
		}
		if len(e.series("rdma_"+strings.ToLower(f.Name())+"_total", "device", rxeDevice, "port", rxePort)) == 0 {
			missing++
			if missing <= 5 {
				errs = append(errs, fmt.Errorf("hw_counters/%s of the re-added %s has no series", f.Name(), rxeDevice))
			}
		}
	}
	l.note("re-added %s: %d hw_counters files, %d without a series", rxeDevice, len(entries), missing)
	return errors.Join(errs...)
}
