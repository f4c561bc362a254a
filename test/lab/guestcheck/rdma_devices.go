package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ibClass is the kernel's list of RDMA devices.
const ibClass = "/sys/class/infiniband"

// rxeDevices lists the rxe devices the kernel has, sorted by name.
func rxeDevices() ([]string, error) {
	ents, err := os.ReadDir(ibClass)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "rxe") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// checkRDMADevices: guest.sh made `want` rxe devices (rxe0 on eth0, rxe1 …
// on dummy netdevs). The plugin reports every one: rdma_port_info with the
// netdev the kernel names for the port, every hw_counters/ file as its
// series with a value between the file read before and after the scrape,
// and every rdma_* family it exports for rxe0 also for each other device.
func checkRDMADevices(l *lab, want int) error {
	devs, err := rxeDevices()
	if err != nil {
		return fmt.Errorf("%w (rdma link add failed? see out/guest.log)", err)
	}
	if len(devs) != want {
		return fmt.Errorf("the kernel lists %d rxe devices in %s (%v), guest.sh was to make %d (LAB_RXE; see out/guest.log)", len(devs), ibClass, devs, want)
	}
	before := map[string]uint64{} // <device>/<file>
	files := map[string][]string{}
	for _, d := range devs {
		dir := filepath.Join(ibClass, d, "ports", rxePort, "hw_counters")
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, f := range ents {
			files[d] = append(files[d], f.Name())
			if v, err := readUint(filepath.Join(dir, f.Name())); err == nil {
				before[d+"/"+f.Name()] = v
			}
		}
	}
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	var errs []error
	ref := e.families("rdma_", "device", rxeDevice)
	if len(ref) == 0 {
		return fmt.Errorf("no rdma_* family has a series for %s", rxeDevice)
	}
	compared := 0
	for _, d := range devs {
		s := e.series("rdma_port_info", "device", d, "port", rxePort)
		if len(s) != 1 {
			errs = append(errs, fmt.Errorf("%d series rdma_port_info{device=%q,port=%q}, want 1", len(s), d, rxePort))
		} else {
			if got, want := label(s[0], "netdev"), rxeNetdevOf(d); got != want {
				errs = append(errs, fmt.Errorf("rdma_port_info{device=%q}: netdev %q, guest.sh added it on %q", d, got, want))
			}
			if got := label(s[0], "state"); !strings.Contains(strings.ToUpper(got), "ACTIVE") {
				errs = append(errs, fmt.Errorf("rdma_port_info{device=%q}: state %q, want ACTIVE", d, got))
			}
		}
		have := e.families("rdma_", "device", d)
		var missing []string
		for _, f := range ref {
			if _, ok := slicesIndex(have, f); !ok {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%s: %d of %s's %d rdma_* families have no series for it: %s", d, len(missing), rxeDevice, len(ref), strings.Join(first(missing, 8), ", ")))
		}
		dir := filepath.Join(ibClass, d, "ports", rxePort, "hw_counters")
		for _, name := range files[d] {
			if name == "lifespan" {
				continue
			}
			family := "rdma_" + strings.ToLower(name) + "_total"
			got, err := e.value(family, "device", d, "port", rxePort)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s hw_counters/%s: %w", d, name, err))
				continue
			}
			after, err := readUint(filepath.Join(dir, name))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if b := before[d+"/"+name]; got < float64(b) || got > float64(after) {
				errs = append(errs, fmt.Errorf("%s = %v for %s, but hw_counters/%s read %d before and %d after the scrape", family, got, d, name, b, after))
			}
			compared++
		}
	}
	l.note("%d rxe devices (%s); %d rdma_* families for %s, each present for every device; %d hw_counters series compared with sysfs",
		len(devs), strings.Join(devs, ", "), len(ref), rxeDevice, compared)
	return errors.Join(errs...)
}

// rxeNetdevOf is the netdev guest.sh added device d on: rxe0 on eth0,
// rxe<N> on dummy<N-1>.
func rxeNetdevOf(d string) string {
	var n int
	if _, err := fmt.Sscanf(d, "rxe%d", &n); err != nil || n == 0 {
		return rxeNetdev
	}
	return fmt.Sprintf("dummy%d", n-1)
}

func slicesIndex(s []string, v string) (int, bool) {
	i := sort.SearchStrings(s, v)
	return i, i < len(s) && s[i] == v
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… (%d more)", len(s)-n))
	}
	return s
}
