package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/cgroup"
	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Defaults for a manifest that sets no limits (each key on its own, the so
// plugin's instances included): enough for the shipped plugins' runtimes,
// small enough that one plugin cannot take the node.
const (
	DefaultMemory = "256MiB"
	DefaultPids   = 128
	DefaultNofile = 1024
	DefaultCPU    = 1.0
	// DefaultFileSize bounds every file a plugin writes (RLIMIT_FSIZE):
	// collectors write state files, not data; a plugin that needs more
	// says so in limits.file_size.
	DefaultFileSize = "64MiB"
)

// resolveLimits fills s's limits from the manifest's, defaults for what it
// leaves out.
func resolveLimits(s *Spec, l manifest.Limits) error {
	mem := l.Memory
	if mem == "" {
		mem = DefaultMemory
	}
	var err error
	if s.MemoryBytes, err = manifest.ParseBytes(mem); err != nil {
		return fmt.Errorf("limits.memory: %w", err)
	}
	fsize := l.FileSize
	if fsize == "" {
		fsize = DefaultFileSize
	}
	if s.FileSizeBytes, err = manifest.ParseBytes(fsize); err != nil {
		return fmt.Errorf("limits.file_size: %w", err)
	}
	s.Pids, s.Nofile, s.CPU = l.Pids, l.Nofile, l.CPU
	if s.Pids == 0 {
		s.Pids = DefaultPids
	}
	if s.Nofile == 0 {
		s.Nofile = DefaultNofile
	}
	if s.CPU == 0 {
		s.CPU = DefaultCPU
	}
	return nil
}

var cgroupWarnOnce sync.Once

// detectCgroups is cgroup.Detect; a variable for tests.
var detectCgroups = func() error { _, err := cgroup.Detect(); return err }

// cgroupWarning says once per host, when no plugin can get a cgroup, which
// limits are not enforced and why; nothing where they are.
func cgroupWarning() (w []string) {
	err := detectCgroups()
	if err == nil {
		return nil
	}
	cgroupWarnOnce.Do(func() {
		w = append(w, fmt.Sprintf("no per-plugin cgroup (%v): limits.pids, limits.cpu and the plugins' cgroup CPU weight are not enforced for any plugin (they still run at nice 10), and limits.memory is RLIMIT_DATA, which counts private memory only (not shared mappings, memfd, SysV or tmpfs pages)", err))
	})
	return w
}

// goRuntimeAllowance is added to the memory limit when it becomes
// RLIMIT_DATA: the Go runtime maps about 100 MiB of address space before the
// first allocation (a 32 MiB arena index, a 64 MiB heap arena), none of it
// resident, all of it counted by RLIMIT_DATA.
const goRuntimeAllowance = 128 << 20

// limits joins the plugin's cgroup (whose limits the host has set), or
// falls back to rlimits that are safe for Go programs; never lets the
// plugin dump core (RLIMIT_CORE 0: a crashing vendor collector must not fill
// the node's disks); and bounds every file it writes (RLIMIT_FSIZE: a cgroup
// does not bound disk space, so a plugin with a read-write grant could
// otherwise fill the file system under it). RLIMIT_AS would count the runtime's PROT_NONE address
// space reservations and kill any Go program; RLIMIT_DATA counts only
// writable private mappings, so it gets the limit plus goRuntimeAllowance,
// and GOMEMLIMIT (set by the host) keeps a Go plugin's heap under the limit
// itself. There is no safe rlimit for pids: RLIMIT_NPROC counts the threads
// of every process of the uid.
func limits(s *Spec) error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("RLIMIT_CORE: %w", err)
	}
	if s.FileSizeBytes > 0 {
		// A write past the bound fails with EFBIG and the kernel sends
		// SIGXFSZ, whose default action kills (and would dump core).
		// Ignored here, the disposition survives exec, so a plugin in any
		// language gets the error and can report it instead of dying; a Go
		// plugin's runtime ignores the signal by itself anyway. A plugin
		// that installs its own handler may still choose to die.
		signal.Ignore(unix.SIGXFSZ)
		lim := uint64(s.FileSizeBytes)
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			return fmt.Errorf("RLIMIT_FSIZE: %w", err)
		}
	}
	for _, d := range s.Cgroups {
		// "0" is the writer itself, whatever PID namespace it is in.
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	if len(s.Cgroups) == 0 && s.MemoryBytes > 0 {
		lim := uint64(s.MemoryBytes) + goRuntimeAllowance
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			return fmt.Errorf("RLIMIT_DATA: %w", err)
		}
	}
	if s.Nofile > 0 {
		lim := uint64(s.Nofile)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			return fmt.Errorf("RLIMIT_NOFILE: %w", err)
		}
	}
	return nil
}
