package main

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BenchmarkProgramCost reports each disk program's average run time per
// event from the kernel's BPF run-time statistics (BPF_ENABLE_STATS, what
// kernel.bpf_stats_enabled switches on), over O_DIRECT writes to a loop
// device. The target is 400 ns per event.
func BenchmarkProgramCost(b *testing.B) {
	for _, attach := range []string{attachTPBTF, attachTracepoint} {
		b.Run(attach, func(b *testing.B) {
			if attach == attachTracepoint {
				requireRoot(b)
				requireTracefs(b)
			}
			stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
			if err != nil {
				b.Skipf("BPF run-time statistics: %v", err)
			}
			defer stats.Close()
			requireRoot(b)
			_, path := loopDevice(b)
			p := loadForBench(b, attach)
			defer p.Close()
			b.ResetTimer()
			directIO(b, path, b.N, 0)
			b.StopTimer()
			for _, h := range diskVariants[attach].hooks {
				s, err := p.disk.coll.Programs[h.program].Stats()
				if err != nil {
					b.Fatal(err)
				}
				if s.RunCount == 0 {
					b.Fatalf("%s never ran", h.program)
				}
				b.ReportMetric(float64(s.Runtime.Nanoseconds())/float64(s.RunCount), h.event+"-ns/event")
			}
		})
	}
}

// BenchmarkDirectWrite is the I/O microbenchmark: one synchronous 4 KiB
// O_DIRECT write to a loop device, with and without the disk programs.
func BenchmarkDirectWrite(b *testing.B) {
	for _, mode := range []string{"none", attachTPBTF, attachTracepoint} {
		b.Run(mode, func(b *testing.B) {
			if mode == attachTracepoint {
				requireRoot(b)
				requireTracefs(b)
			}
			requireRoot(b)
			_, path := loopDevice(b)
			if mode != "none" {
				p := loadForBench(b, mode)
				defer p.Close()
			}
			b.ResetTimer()
			start := time.Now()
			directIO(b, path, b.N, 0)
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/write")
		})
	}
}

func loadForBench(b *testing.B, attach string) *plugin {
	b.Helper()
	p := newPlugin()
	p.logf = func(string, ...any) {}
	c := defaultConfig()
	c.Attach = attach
	off := false
	c.TCPRetransmits = &off
	if err := c.validate(); err != nil {
		b.Fatal(err)
	}
	p.cfg, p.tracefs = c, "/sys/kernel/tracing"
	p.disk = p.loadGroup("disk", collectorDisk, func() (*ebpf.CollectionSpec, error) {
		s, err := diskSpec(c.bounds)
		return s, err
	})
	if p.disk == nil {
		b.Fatalf("disk programs not running as %s: %v", attach, p.pending)
	}
	return p
}

// BenchmarkSockProgramCost reports the connection programs' run time per
// event over 1-byte request/response round trips on a loopback connection
// to a watched endpoint (the programs' full path: filter hits, counts).
func BenchmarkSockProgramCost(b *testing.B) {
	for _, attach := range []string{attachTPBTF, attachTracepoint} {
		b.Run(attach, func(b *testing.B) {
			requireRoot(b)
			if attach == attachTracepoint {
				requireTracefs(b)
			}
			stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
			if err != nil {
				b.Skipf("BPF run-time statistics: %v", err)
			}
			defer stats.Close()
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				io.Copy(c, c)
			}()
			port := uint16(l.Addr().(*net.TCPAddr).Port)
			p := newPlugin()
			p.logf = func(string, ...any) {}
			c := defaultConfig()
			c.Attach, c.ObjectStoreEndpoints, c.ObjectStorePorts = attach, []string{"127.0.0.1"}, []uint16{port}
			c.NFSServers = []string{"192.0.2.1"}
			if err := c.validate(); err != nil {
				b.Fatal(err)
			}
			p.cfg, p.tracefs, p.watch = c, "/sys/kernel/tracing", newWatchState()
			p.conn = p.loadGroup("object_store_connections", collectorConnections, func() (*ebpf.CollectionSpec, error) {
				s, err := connSpec(c.connBounds)
				return s, err
			})
			if p.conn == nil {
				b.Fatalf("connection programs not running as %s: %v", attach, p.pending)
			}
			defer p.Close()
			p.refreshLocked(b.Context())
			conn, err := net.Dial("tcp4", l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			buf := make([]byte, 1)
			b.ResetTimer()
			for range b.N {
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			for _, h := range connVariants[attach].hooks {
				s, err := p.conn.coll.Programs[h.program].Stats()
				if err != nil {
					b.Fatal(err)
				}
				// inet_sock_set_state runs a few times per connection,
				// too few for an average.
				if s.RunCount >= 100 {
					b.ReportMetric(float64(s.Runtime.Nanoseconds())/float64(s.RunCount), h.event+"-ns/event")
				}
			}
		})
	}
}
