package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// guest.sh adds rxe0 on eth0 (rdma link add rxe0 type rxe netdev eth0).
const (
	rxeDevice = "rxe0"
	rxePort   = "1"
	rxeNetdev = "eth0"
	rxeAddr   = "10.0.2.15"
	hwDir     = "/sys/class/infiniband/rxe0/ports/1/hw_counters"
)

func checkRDMAPortInfo(l *lab) error {
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	s := e.series("rdma_port_info", "device", rxeDevice, "port", rxePort)
	if len(s) != 1 {
		return fmt.Errorf("%d series rdma_port_info{device=%q,port=%q}, want 1", len(s), rxeDevice, rxePort)
	}
	m := s[0]
	l.note("rdma_port_info: netdev=%q link_layer=%q state=%q phys_state=%q", label(m, "netdev"), label(m, "link_layer"), label(m, "state"), label(m, "phys_state"))
	var errs []error
	if got := label(m, "netdev"); got != rxeNetdev {
		errs = append(errs, fmt.Errorf("netdev label %q, want %q", got, rxeNetdev))
	}
	if got := label(m, "link_layer"); !strings.EqualFold(got, "ethernet") {
		errs = append(errs, fmt.Errorf("link_layer label %q, want Ethernet (RoCE)", got))
	}
	if got := label(m, "state"); !strings.Contains(strings.ToUpper(got), "ACTIVE") {
		errs = append(errs, fmt.Errorf("state label %q, want ACTIVE (rdma link show says so)", got))
	}
	return errors.Join(errs...)
}

// checkRDMAHWCounters: every file of the port's real hw_counters/ is one
// rdma_<name>_total series, and its value lies between the file read just
// before and just after the scrape.
func checkRDMAHWCounters(l *lab) error {
	entries, err := os.ReadDir(hwDir)
	if err != nil {
		return fmt.Errorf("%w (rdma link add failed? see out/guest.log)", err)
	}
	beforeVals := map[string]uint64{}
	for _, f := range entries {
		if v, err := readUint(filepath.Join(hwDir, f.Name())); err == nil {
			beforeVals[f.Name()] = v
		}
	}
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	var errs []error
	n := 0
	for _, f := range entries {
		name := f.Name()
		if name == "lifespan" {
			if _, err := e.value("rdma_lifespan_milliseconds", "device", rxeDevice, "port", rxePort); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		family := "rdma_" + strings.ToLower(name) + "_total"
		got, err := e.value(family, "device", rxeDevice, "port", rxePort)
		if err != nil {
			errs = append(errs, fmt.Errorf("hw_counters/%s: %w", name, err))
			continue
		}
		after, err := readUint(filepath.Join(hwDir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b := beforeVals[name]; got < float64(b) || got > float64(after) {
			errs = append(errs, fmt.Errorf("%s = %v, but hw_counters/%s read %d before and %d after the scrape", family, got, name, b, after))
		}
		n++
	}
	l.note("%d hw_counters files, %d compared with their rdma_*_total series", len(entries), n)
	return errors.Join(errs...)
}

// checkRDMAOptional: the optional-counter sub-collector talks RDMA netlink
// (STAT_GET_STATUS) to the real kernel from inside the sandbox. rxe
// advertises no optional counters (rdma statistic mode prints nothing), so
// success here is the netlink conversation, not a series per counter.
func checkRDMAOptional(l *lab) error {
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	ok, err := e.value("rdma_scrape_collector_success", "collector", "optional-counters")
	if err != nil {
		return err
	}
	if ok != 1 {
		return fmt.Errorf("rdma_scrape_collector_success{collector=\"optional-counters\"} = %v: the plugin could not use RDMA netlink in its sandbox", ok)
	}
	if errs, err := e.value("rdma_optional_counter_scrape_errors_total"); err != nil || errs != 0 {
		return fmt.Errorf("rdma_optional_counter_scrape_errors_total = %v (%v), want 0", errs, err)
	}
	mode, _ := run("rdma", "statistic", "mode", "supported", "link", rxeDevice+"/"+rxePort)
	l.note("%d rdma_optional_counter_enabled series for rxe0; rdma statistic mode supported: %q",
		len(e.series("rdma_optional_counter_enabled", "device", rxeDevice)), strings.TrimSpace(mode))
	return nil
}

// checkRDMATraffic runs a 10-iteration rping over rxe0 and expects the
// packet counters to grow by at least that much and to agree with sysfs.
func checkRDMATraffic(l *lab) error {
	const iterations = 10
	before, after, err := around(l, func() error {
		srv := exec.Command("rping", "-s", "-a", rxeAddr, "-C", fmt.Sprint(iterations))
		if err := srv.Start(); err != nil {
			return fmt.Errorf("rping server: %w", err)
		}
		defer func() {
			done := make(chan error, 1)
			go func() { done <- srv.Wait() }()
			select {
			case <-done:
			case <-time.After(120 * time.Second): // TCG on a loaded machine
				srv.Process.Kill()
				<-done
			}
		}()
		if err := waitRpingListen("7174"); err != nil { // the server's listen before the client connects
			return err
		}
		_, err := run("rping", "-c", "-a", rxeAddr, "-C", fmt.Sprint(iterations))
		return err
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range []string{"sent_pkts", "rcvd_pkts"} {
		family := "rdma_" + c + "_total"
		d, err := delta(before, after, family, "device", rxeDevice, "port", rxePort)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		now, _ := readUint(filepath.Join(hwDir, c))
		got, _ := after.value(family, "device", rxeDevice, "port", rxePort)
		l.note("%s grew by %v over %d rping iterations (sysfs now %d)", family, d, iterations, now)
		if d < iterations {
			errs = append(errs, fmt.Errorf("%s grew by %v over %d rping iterations, want >= %d", family, d, iterations, iterations))
		}
		if got > float64(now) {
			errs = append(errs, fmt.Errorf("%s = %v, above hw_counters/%s = %d read after it", family, got, c, now))
		}
	}
	return errors.Join(errs...)
}
