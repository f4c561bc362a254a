// Package proctree reads what the measuring tools need of a process tree
// from /proc: the processes below a pid and their CPU time. The bench
// harness (internal/dev/bench) and the lab's bench (test/lab/guestcheck)
// measure an exporter as the same tree the same way, so they share it.
package proctree

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Stat is what the tools read of /proc/<pid>/stat.
type Stat struct {
	PPID         int
	UTime, STime uint64 // clock ticks
}

// ReadStat parses /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (Stat, error) {
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return Stat{}, errors.New("bad stat")
	}
	f := strings.Fields(s[i+2:])
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return Stat{}, errors.New("short stat")
	}
	var st Stat
	var err error
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("stat ppid: %w", err)
	}
	if st.UTime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat utime: %w", err)
	}
	if st.STime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat stime: %w", err)
	}
	return st, nil
}

// parents maps every process in /proc to its parent.
func parents() map[int]int {
	ents, _ := os.ReadDir("/proc")
	parent := make(map[int]int, len(ents))
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(n); err == nil {
			parent[n] = st.PPID
		}
	}
	return parent
}

// Children lists the processes whose parent is pid, sorted (a scan of
// /proc: the host forks plugins from a thread other than its main one,
// so the main thread's children file does not list them).
func Children(pid int) []int {
	var out []int
	for n, p := range parents() {
		if p == pid {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// Descendants lists every process below pid (children, their children,
// ...), sorted.
func Descendants(pid int) []int {
	return below(parents(), pid)
}

func below(parent map[int]int, pid int) []int {
	var out []int
	for n := range parent {
		for p := parent[n]; p != 0; p = parent[p] {
			if p == pid {
				out = append(out, n)
				break
			}
			if _, ok := parent[p]; !ok {
				break
			}
		}
	}
	sort.Ints(out)
	return out
}

var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
}()

// CPU is a process's CPU time in seconds, every thread, live and exited:
// its CPU clock (clock_gettime of its CLOCK_PROCESS_CPUTIME_ID, the
// scheduler's sum_exec_runtime of the thread group), the quantity
// /proc/<pid>/stat's utime+stime are scaled to, without their 10 ms clock
// ticks, so that one scrape's CPU is measured, not rounded to a tick.
// Where the kernel does not answer for another process, utime+stime from
// /proc/<pid>/stat.
func CPU(pid int) (float64, error) {
	var ts unix.Timespec
	// clock_getcpuclockid(pid): MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
	if pid > 0 && pid < 1<<28 {
		if err := unix.ClockGettime(int32(^pid<<3|2), &ts); err == nil {
			return float64(ts.Nano()) / 1e9, nil
		}
	}
	st, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	return float64(st.UTime+st.STime) / clockTicks, nil
}

// CPUSum is the CPU time, in seconds, of the processes together.
func CPUSum(pids []int) (float64, error) {
	var total float64
	for _, pid := range pids {
		s, err := CPU(pid)
		if err != nil {
			return 0, fmt.Errorf("pid %d gone: %w", pid, err)
		}
		total += s
	}
	return total, nil
}
