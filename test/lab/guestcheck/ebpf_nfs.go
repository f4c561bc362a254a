package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// nfsProtocol is the ebpf plugin's protocol label of a mount's NFS
// version: the RPC program's version (4.1 and 4.2 are RPC version 4).
var nfsProtocol = map[string]string{"4.2": "nfs4", "3": "nfs3"}

// checkEBPFNFSLatency does a known number of synchronous NFS RPCs through
// each of guest.sh's mounts and expects the sunrpc:rpc_stats_latency
// program to have counted at least those, under the volume_id the nfs
// plugin reports for the same mount (the two derive it from the mount
// table independently).
//
// O_DIRECT|O_SYNC bypasses the page cache both ways: every write is one
// WRITE RPC (stable, so no COMMIT is owed) and every read one READ RPC,
// each of at most rsize/wsize (4 KiB here). The counts are lower bounds:
// the client also sends GETATTRs and ACCESSes of its own, and the lab's
// other checks use the mounts.
func checkEBPFNFSLatency(l *lab) error {
	const block, writes, reads = 4096, 20, 30
	before, after, err := around(l, func() error {
		for _, m := range nfsMounts {
			if err := nfsDirectIO(filepath.Join(m.dir, "ebpf.bin"), block, writes, reads); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range nfsMounts {
		info := after.series("nfs_mount_info", "mountpoint", m.dir)
		if len(info) != 1 {
			errs = append(errs, fmt.Errorf("%d series nfs_mount_info{mountpoint=%q}, want 1: the volume_id to compare with is unknown", len(info), m.dir))
			continue
		}
		volume, server := label(info[0], "volume_id"), label(info[0], "server")
		protocol := nfsProtocol[m.version]
		for _, op := range []struct {
			name string
			n    float64
		}{{"write", writes}, {"read", reads}} {
			want := []string{"protocol", protocol, "operation", op.name, "volume_id", volume, "server", server}
			requests, err := eventDelta(before, after, "nfs_op_requests_total", want...)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w (series of the server: %s)", m.dir, err, nfsOpSeries(after, server)))
				continue
			}
			count, err := eventDelta(before, after, "nfs_op_latency_seconds", want...)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m.dir, err))
				continue
			}
			sum := histogramSum(after, "nfs_op_latency_seconds", want...) - histogramSum(before, "nfs_op_latency_seconds", want...)
			switch {
			case requests < op.n:
				errs = append(errs, fmt.Errorf("nfs_op_requests_total{%s} grew by %v, want >= %v (O_DIRECT %ss through %s)", pairs(want), requests, op.n, op.name, m.dir))
			case count != requests:
				errs = append(errs, fmt.Errorf("nfs_op_latency_seconds{%s} count grew by %v, requests by %v: one observation per request", pairs(want), count, requests))
			case sum <= 0:
				errs = append(errs, fmt.Errorf("nfs_op_latency_seconds{%s} sum grew by %v over %v requests, want > 0", pairs(want), sum, requests))
			default:
				l.note("%s %s %s: %v requests (>= %v done), mean latency %.3g ms, volume_id %q = nfs_mount_info's", m.dir, protocol, op.name, requests, op.n, 1e3*sum/requests, volume)
			}
			// tp_btf mode reports RPC retransmissions per operation; on a
			// loopback server there are none.
			if len(after.series("nfs_op_rpc_retransmits_total", want...)) == 1 {
				if r, err := eventDelta(before, after, "nfs_op_rpc_retransmits_total", want...); err == nil && r != 0 {
					l.note("nfs_op_rpc_retransmits_total{%s} grew by %v on loopback", pairs(want), r)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// nfsDirectIO writes writes blocks with O_DIRECT|O_SYNC, then reads reads
// blocks (wrapping around the written ones) with O_DIRECT.
func nfsDirectIO(path string, block, writes, reads int) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT|unix.O_SYNC, 0o644)
	if err != nil {
		return fmt.Errorf("open %s O_DIRECT|O_SYNC: %w", path, err)
	}
	defer f.Close()
	buf, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	for i := range writes {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i*block)); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	for i := range reads {
		if _, err := f.ReadAt(buf, int64((i%writes)*block)); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	return nil
}

func histogramSum(e exposition, name string, want ...string) float64 {
	s := e.series(name, want...)
	if len(s) != 1 {
		return 0
	}
	return s[0].GetHistogram().GetSampleSum()
}

// nfsOpSeries lists the ebpf plugin's NFS request series of a server, for
// a failure message that shows what was counted instead.
func nfsOpSeries(e exposition, server string) string {
	var out []string
	for _, m := range e.series("nfs_op_requests_total", "server", server) {
		out = append(out, seriesLabels(m)+fmt.Sprintf("=%v", sampleValue(m)))
	}
	if len(out) == 0 {
		return fmt.Sprintf("none (%d series in the family)", len(e["nfs_op_requests_total"].GetMetric()))
	}
	return fmt.Sprint(out)
}

func seriesLabels(m *dto.Metric) string {
	var want []string
	for _, l := range m.GetLabel() {
		want = append(want, l.GetName(), l.GetValue())
	}
	return "{" + pairs(want) + "}"
}
