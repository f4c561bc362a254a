package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	prom "github.com/prometheus/procfs"
)

// Liveness of a server process, from the node's procfs.
//
// ernic-exporter calls kill(pid, 0). That cannot work for a sandboxed
// plugin: the host starts it in its own PID namespace, where the node's
// pids do not exist (kill returns ESRCH for a live server, or signals an
// unrelated process of the namespace that happens to have that number),
// and Landlock's signal scope refuses signals to processes outside the
// plugin's domain (EPERM for every pid). The host does not remount /proc
// for the plugin, so <procfs>/<pid> still names the node's processes: a
// process exists while its directory does. Its stat file also gives the
// start time, which detects pid reuse and is the uptime's origin.

// userHZ is the unit of the start time in /proc/<pid>/stat: the kernel
// reports it in USER_HZ, which is 100 on every Linux architecture.
const userHZ = 100

// procState is what procfs says about one pid.
type procState int

const (
	procGone    procState = iota // no such process (or a zombie: it has exited)
	procAlive                    // the process exists
	procUnknown                  // procfs could not be read for another reason
)

// process is one pid's state and, when its stat file could be read, its
// start time in clock ticks after boot (0 when unknown).
type process struct {
	state     procState
	startTick uint64
}

// procfs reads processes under a procfs root.
type procfs struct{ root string }

// lookup reports on pid. The directory's existence decides liveness: stat
// needs no permission, so a process of another user under hidepid=1 (its
// files unreadable, EACCES) is still alive, which is what EPERM from
// kill(pid, 0) means too. A zombie has exited and is down. An error other
// than "does not exist" leaves the state unknown, returned as err.
func (p procfs) lookup(pid int) (process, error) {
	if pid <= 0 {
		return process{state: procGone}, nil
	}
	fsys, err := prom.NewFS(p.root)
	if err != nil {
		return process{state: procUnknown}, err
	}
	proc, err := fsys.Proc(pid) // stats <root>/<pid>
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return process{state: procGone}, nil
		}
		return process{state: procUnknown}, err
	}
	st, err := proc.Stat()
	switch {
	case errors.Is(err, fs.ErrNotExist): // exited between the two calls
		return process{state: procGone}, nil
	case errors.Is(err, fs.ErrPermission):
		return process{state: procAlive}, nil // exists, details hidden: alive, no start time
	case err != nil:
		return process{state: procAlive}, fmt.Errorf("%s/%d/stat: %w", p.root, pid, err)
	case st.State == "Z" || st.State == "X":
		return process{state: procGone}, nil
	}
	return process{state: procAlive, startTick: st.Starttime}, nil
}

// uptime returns the node's uptime in seconds from <procfs>/uptime.
func (p procfs) uptime() (float64, error) {
	data, err := os.ReadFile(filepath.Join(p.root, "uptime"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s: empty", filepath.Join(p.root, "uptime"))
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(p.root, "uptime"), err)
	}
	return up, nil
}
