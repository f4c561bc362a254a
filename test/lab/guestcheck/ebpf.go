package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	diskDevice = "nvme0n1"
	// guest.sh serves its share with busybox httpd here; the lab's config
	// names it as the ebpf plugin's object-store endpoint.
	objectStore     = "127.0.0.1"
	objectStoreURL  = "http://127.0.0.1:8080/"
	connectionCount = 5
)

// checkEBPFAttach reports the mode each program group attached in. On
// kernels before 6.3, which lack the sock_*_length events, the
// object-store group counts through tcp_set_state, tcp_sendmsg and
// tcp_cleanup_rbuf (fentry, else kprobes); the NFS group loads in
// whichever mode the kernel allows for its module's tracepoint.
func checkEBPFAttach(l *lab) error {
	e, err := l.s.scrape()
	if err != nil {
		return err
	}
	running := map[string][]string{}
	var errs []error
	for _, m := range e.series("ebpf_program_loaded") {
		if sampleValue(m) == 1 {
			running[label(m, "program")] = append(running[label(m, "program")], label(m, "attach"))
		}
	}
	var programs []string
	for p, modes := range running {
		programs = append(programs, p+"="+strings.Join(modes, "+"))
		if len(modes) != 1 {
			errs = append(errs, fmt.Errorf("program %s runs in %d attach modes %v, want one", p, len(modes), modes))
		}
	}
	sort.Strings(programs)
	if len(running) == 0 {
		errs = append(errs, fmt.Errorf("no ebpf_program_loaded series is 1 (%d series): no program attached", len(e.series("ebpf_program_loaded"))))
	}
	want := []string{"block_rq_issue", "block_rq_complete", "tcp_retransmit_skb", "rpc_stats_latency", "inet_sock_set_state"}
	if !hasSockLengthEvents() {
		want = append(want[:len(want)-1], "tcp_set_state", "tcp_sendmsg", "tcp_cleanup_rbuf")
	}
	for _, p := range want {
		if _, ok := running[p]; !ok {
			errs = append(errs, fmt.Errorf("program %s is not running (running: %v)", p, programs))
		}
	}
	if v, err := e.value("ebpf_watched_addresses", "class", "nfs"); err != nil || v < 1 {
		errs = append(errs, fmt.Errorf("ebpf_watched_addresses{class=\"nfs\"} = %v (%v): the loopback NFS mounts' server was not detected", v, err))
	}
	_, kerr := os.Stat("/sys/kernel/tracing/kprobe_events")
	_, perr := os.Stat("/sys/bus/event_source/devices/kprobe/type")
	paranoid, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	l.note("running: %v; kernel kprobe_events present: %v, kprobe PMU: %v, perf_event_paranoid %s", programs, kerr == nil, perr == nil, strings.TrimSpace(string(paranoid)))
	return errors.Join(errs...)
}

// checkEBPFDisk makes O_DIRECT reads and writes on the NVMe namespace (the
// page cache would hide reads from the block layer) and expects the block
// tracepoint programs to count every one. A kernel does not always run an
// attached program for a block completion (plugins/ebpf's disk test
// measured about one in a thousand on a loaded 6.18 machine), so a round
// that counts fewer is noted and repeated, up to diskRounds; each round is
// judged on its own.
func checkEBPFDisk(l *lab) error {
	const block, reads, writes = 4096, 200, 50
	const diskRounds = 5
	var errs []error
	for round := 1; round <= diskRounds; round++ {
		if errs = ebpfDiskRound(l, block, reads, writes); len(errs) == 0 || round == diskRounds {
			break
		}
		l.note("round %d of the O_DIRECT I/O counted short, repeated: %v", round, errors.Join(errs...))
	}
	return errors.Join(errs...)
}

// ebpfDiskRound is one round of checkEBPFDisk.
func ebpfDiskRound(l *lab, block, reads, writes int) []error {
	before, after, err := around(l, func() error { return directIO(block, reads, writes) })
	if err != nil {
		return []error{err}
	}
	var errs []error
	atLeast := func(family string, want float64) {
		d, err := eventDelta(before, after, family, "device", diskDevice)
		switch {
		case err != nil:
			errs = append(errs, err)
		case d < want:
			errs = append(errs, fmt.Errorf("%s{device=%q} grew by %v, want >= %v", family, diskDevice, d, want))
		default:
			l.note("%s grew by %v (want >= %v)", family, d, want)
		}
	}
	atLeast("disk_reads_completed_total", float64(reads))
	atLeast("disk_read_bytes_total", float64(reads*block))
	atLeast("disk_read_latency_seconds", float64(reads)) // the histogram's count
	atLeast("disk_writes_completed_total", float64(writes))
	atLeast("disk_write_bytes_total", float64(writes*block))
	return errs
}

func directIO(block, reads, writes int) error {
	path := "/dev/" + diskDevice
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return fmt.Errorf("open %s O_DIRECT: %w", path, err)
	}
	defer f.Close()
	// O_DIRECT needs an aligned buffer: an anonymous mapping is page-aligned.
	buf, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	for i := 0; i < reads; i++ {
		if _, err := f.ReadAt(buf, int64(i*block)); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	// Writes go to the second half of the scratch disk, away from anything
	// guest.sh wrote before.
	for i := 0; i < writes; i++ {
		if _, err := f.WriteAt(buf, int64(128<<20+i*block)); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// checkEBPFConnections opens connectionCount new TCP connections to the
// object-store endpoint and expects the socket-state program to count them
// (the TCP counters the guest can move: retransmissions need a lossy path,
// which a loopback guest does not have). Before 6.3 the fentry or kprobe
// mode counts them (ebpf/attach says which).
func checkEBPFConnections(l *lab) error {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	before, after, err := around(l, func() error {
		for i := 0; i < connectionCount; i++ {
			resp, err := client.Get(objectStoreURL)
			if err != nil {
				return fmt.Errorf("GET %s: %w (guest.sh starts httpd there)", objectStoreURL, err)
			}
			resp.Body.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for family, want := range map[string]float64{
		"object_store_connections_total":          connectionCount,
		"object_store_connection_latency_seconds": connectionCount,
		"object_store_bytes_sent_total":           1,
		"object_store_bytes_received_total":       1,
	} {
		d, err := eventDelta(before, after, family, "endpoint", objectStore)
		switch {
		case err != nil:
			errs = append(errs, err)
		case d < want:
			errs = append(errs, fmt.Errorf("%s{endpoint=%q} grew by %v over %d connections, want >= %v", family, objectStore, d, connectionCount, want))
		default:
			l.note("%s grew by %v", family, d)
		}
	}
	return errors.Join(errs...)
}

// hasSockLengthEvents: sock:sock_send_length and sock_recv_length, which
// the object-store group's tracepoint modes attach to, came in Linux 6.3.
func hasSockLengthEvents() bool {
	_, err := os.Stat("/sys/kernel/tracing/events/sock/sock_send_length")
	return err == nil
}
