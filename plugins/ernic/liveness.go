package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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

// reuseGrace is how much later than its statistics file's last write a
// process may have started and still be taken for the instance's server.
// A server writes the file about once a second from its start; the margin
// covers a slow first write.
const reuseGrace = 60 * time.Second

// serverWatch tells an instance's server from another process that was
// given its pid after the server died (the manifest still lists the dead
// server's pid until the launcher rewrites it).
type serverWatch struct {
	first map[string]incarnation // per instance: the process first seen alive at the manifest's pid
}

func newServerWatch() *serverWatch { return &serverWatch{first: map[string]incarnation{}} }

// check returns proc, marked gone when it is not the server, and the
// incarnation the instance's statistics belong to. A live process is not
// the server when the same pid was first seen with another start time, or
// when it started more than reuseGrace after the statistics file was last
// written (statsMtime; zero when there is none). startEpoch converts a
// start tick to Unix seconds (ok false when the node's uptime is unknown).
func (sw *serverWatch) check(id string, pid int, proc process, statsMtime time.Time, startEpoch func(uint64) (float64, bool)) (process, incarnation) {
	inc := incarnation{pid: pid, startTick: proc.startTick}
	first, seen := sw.first[id]
	if seen && first.pid != pid {
		seen = false // the launcher wrote a new pid: a new server
	}
	if proc.state != procAlive || proc.startTick == 0 {
		if seen {
			return proc, first
		}
		return proc, inc
	}
	if seen && first.startTick != proc.startTick {
		return process{state: procGone}, first // the pid was reused
	}
	if !statsMtime.IsZero() {
		if start, ok := startEpoch(proc.startTick); ok && start > float64(statsMtime.Unix())+reuseGrace.Seconds() {
			return process{state: procGone}, incarnation{pid: pid} // started long after the server's last write
		}
	}
	sw.first[id] = inc
	return proc, inc
}

// forget drops the instances not in ids (removed from the manifest).
func (sw *serverWatch) forget(ids map[string]bool) {
	for id := range sw.first {
		if !ids[id] {
			delete(sw.first, id)
		}
	}
}

// nodeClock is one collect's view of time: the collect's start and the
// node's uptime, read at most once and only when a series needs it.
type nodeClock struct {
	proc procfs
	now  time.Time
	fail func(error) // reports the uptime's read error, once

	read bool
	up   float64 // 0 when unreadable
}

// epoch returns the collect's start in Unix seconds, exact to the
// nanosecond (float64(UnixNano)/1e9 would round at this magnitude).
func (c *nodeClock) epoch() float64 {
	return float64(c.now.Unix()) + float64(c.now.Nanosecond())/1e9
}

// uptime returns the node's uptime in seconds, 0 when it cannot be read.
func (c *nodeClock) uptime() float64 {
	if !c.read {
		c.read = true
		var err error
		if c.up, err = c.proc.uptime(); err != nil {
			c.fail(err)
		}
	}
	return c.up
}

// startEpoch converts a process's start tick to Unix seconds; ok is false
// when the node's uptime is unknown.
func (c *nodeClock) startEpoch(tick uint64) (float64, bool) {
	u := c.uptime()
	return c.epoch() - (u - float64(tick)/userHZ), u > 0
}
