package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// attachTracepointAt attaches prog to the classic tracepoint group/event
// whose id it reads under tracefs, the plugin's tracefs_path. It opens the
// perf event itself (instead of link.Tracepoint, which looks for tracefs at
// fixed paths) so that what it reads follows the host's --path.sysfs and
// the manifest can grant exactly that directory.
func attachTracepointAt(tracefs, group, event string, prog *ebpf.Program) (io.Closer, error) {
	idPath := filepath.Join(tracefs, "events", group, event, "id")
	raw, err := os.ReadFile(idPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("tracepoint %s/%s: %w (is tracefs mounted at %s, and does this kernel have the event?)", group, event, err, tracefs)
		}
		return nil, fmt.Errorf("tracepoint %s/%s: %w", group, event, err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("tracepoint %s/%s: %s: %w", group, event, idPath, err)
	}
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config:      id,
		Sample_type: unix.PERF_SAMPLE_RAW,
		Sample:      1,
		Wakeup:      1,
	}
	// pid -1, cpu 0: a tracepoint's program runs on every CPU whatever cpu
	// the event is opened on.
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open tracepoint %s/%s: %w", group, event, err)
	}
	l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("attach tracepoint %s/%s: %w", group, event, err)
	}
	return &perfLink{link: l, fd: fd}, nil
}

// perfLink is a BPF link on a perf event and the event's descriptor.
type perfLink struct {
	link link.Link
	fd   int
}

func (p *perfLink) Close() error {
	err := p.link.Close()
	return errors.Join(err, unix.Close(p.fd))
}
