package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plexporter/plexporter/internal/dev/bench/workload"
)

// runBaseline is configuration (A): the workload in an in-process
// client_golang registry (plus the Go and process collectors, like any
// exporter), served by promhttp with OpenMetrics enabled. It runs as its own
// process (the harness re-executes itself) so that its CPU is measured like
// the host's, and exits when its stdin closes (the harness went away).
func runBaseline(args []string) int {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	series := fs.Int("series", 1000, "series of the workload")
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := workload.Register(reg, *series); err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})))
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ready\n")) })
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "baseline: serving", *series, "series on", *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	return 0
}

// startBaseline runs configuration (A) with n series.
func (h *harness) startBaseline(name string, n int) (*exporter, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := h.startProcStdin(name, addr, self, []string{"baseline", "-series", strconv.Itoa(n), "-listen", addr})
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(p, "/ready", 5*time.Millisecond, 60*time.Second); err != nil {
		return nil, err
	}
	return &exporter{proc: p, path: "/metrics"}, nil
}
