package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// readerEnv makes the test binary, exec'd by the launcher, the sandboxed
// "plugin" of TestProcfsGrantsSurviveDentryReclaim: it reads the paths the
// variable lists (separated by newlines) whenever its stdin says "read".
const readerEnv = "PLEXPORTER_SANDBOX_TEST_READER"

func TestMain(m *testing.M) {
	switch {
	case len(os.Args) > 1 && os.Args[1] == LaunchArg:
		Launch() // the test binary as the plugin's launcher; never returns
	case len(os.Args) > 1 && os.Args[1] == ChildArg:
		LaunchChild()
	case os.Getenv(readerEnv) != "":
		os.Exit(reader(strings.Split(os.Getenv(readerEnv), "\n"), os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// reader is the sandboxed side. "read": one line per path, "<path>\tok" or
// "<path>\t<error>", then "end". "unpin": closes every O_PATH descriptor it
// inherited (the launcher's pins, nothing else of a Go process is O_PATH)
// and says how many: the control that shows the pins are the fix.
func reader(paths []string, in io.Reader, out io.Writer) int {
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		switch lines.Text() {
		case "read":
			for _, p := range paths {
				result := "ok"
				if _, err := os.ReadFile(p); err != nil {
					result = err.Error()
				}
				fmt.Fprintf(out, "%s\t%s\n", p, result)
			}
			fmt.Fprintln(out, "end")
		case "unpin":
			closed := 0
			for fd := 3; fd < 1024; fd++ {
				if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && fl&unix.O_PATH != 0 {
					unix.Close(fd)
					closed++
				}
			}
			fmt.Fprintf(out, "closed %d\n", closed)
		}
	}
	return 0
}

// sandboxedReader is a reader started through the real launcher, in its own
// PID namespace, as nobody, with the Landlock rules of grants.
type sandboxedReader struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr bytes.Buffer
}

func startSandboxedReader(t *testing.T, grants, reads []string) *sandboxedReader {
	t.Helper()
	bin := installedTestBinary(t)
	spec := &Spec{
		Binary: bin, Argv0: "plexporter-pintest", UID: 65534, GID: 65534,
		ReadOnly: grants, Nofile: 64, Landlock: true, PIDNamespace: true,
	}
	args, err := spec.LauncherArgs()
	if err != nil {
		t.Fatal(err)
	}
	r := &sandboxedReader{t: t, cmd: exec.Command(bin, args...)}
	r.cmd.SysProcAttr = spec.SysProcAttr()
	r.cmd.Env = []string{readerEnv + "=" + strings.Join(reads, "\n")}
	r.cmd.Stderr = &r.stderr
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.lines = bufio.NewScanner(stdout)
	// The host's lifeline (host/internal/launch): the launcher refuses to
	// start a plugin whose host is gone, and the test is the host.
	lifeline, hostEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.ExtraFiles = []*os.File{lifeline}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lifeline.Close()
	t.Cleanup(func() {
		hostEnd.Close()
		r.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- r.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			r.cmd.Process.Kill()
			<-done
		}
	})
	return r
}

func (r *sandboxedReader) send(cmd string) {
	r.t.Helper()
	if _, err := fmt.Fprintln(r.stdin, cmd); err != nil {
		r.t.Fatalf("%s: %v; launcher stderr: %s", cmd, err, r.stderr.String())
	}
}

func (r *sandboxedReader) line() string {
	r.t.Helper()
	if !r.lines.Scan() {
		r.t.Fatalf("the sandboxed reader ended (%v); launcher stderr: %s", r.lines.Err(), r.stderr.String())
	}
	return r.lines.Text()
}

// read returns each path's result: "ok" or the error.
func (r *sandboxedReader) read() map[string]string {
	r.t.Helper()
	r.send("read")
	results := map[string]string{}
	for l := r.line(); l != "end"; l = r.line() {
		path, result, _ := strings.Cut(l, "\t")
		results[path] = result
	}
	return results
}

// installedTestBinary copies the test binary where the plugin user can
// execute it (go test's build directory is root's, mode 0700), as a plugin
// is installed.
func installedTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "plexporter-pintest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plexporter-pintest")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// dropDentries reclaims every unused dentry and inode, as memory pressure
// does over time. Twice, apart: a dentry looked up since the last pass is
// marked referenced and only rotated, and a just-closed descriptor's dentry
// is released after an RCU grace period (measured: one drop right after the
// reads left /proc/<pid>/... in place).
func dropDentries(t *testing.T) {
	t.Helper()
	for range 2 {
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Fatalf("drop dentries: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestProcfsGrantsSurviveDentryReclaim runs the launcher for real with
// procfs grants of each kind — a file behind /proc/self, a file outside the
// per-pid tree, a directory behind /proc/self read through it and through
// the /proc/net symlink, a plain procfs directory — drops the dentries as
// memory pressure does, and reads again. With the launcher's descriptors
// the reads still pass; with the reader closing them first (what the
// launcher did before) every granted read is denied.
func TestProcfsGrantsSurviveDentryReclaim(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the launcher switches users, and drop_caches is root's")
	}
	if builtWithCgo {
		t.Skip("the launcher needs a CGO_ENABLED=0 build (CheckHost)")
	}
	if v, err := llsyscall.LandlockGetABIVersion(); err != nil || v < 1 {
		t.Skip("no Landlock on this kernel")
	}
	if err := CheckHost(); err != nil {
		t.Skip(err)
	}
	grants := []string{"/proc/self/mountinfo", "/proc/stat", "/proc/self/net"}
	reads := []string{"/proc/self/mountinfo", "/proc/stat", "/proc/self/net/dev", "/proc/net/dev"}
	if _, err := os.Stat("/proc/pressure"); err == nil {
		grants = append(grants, "/proc/pressure")
		reads = append(reads, "/proc/pressure/cpu")
	}
	const notGranted = "/proc/version" // the control that Landlock is on
	reads = append(reads, notGranted)

	perPID := func(p string) bool { return strings.HasPrefix(p, "/proc/self/") || strings.HasPrefix(p, "/proc/net/") }

	// allGrantedReadable: every granted path reads, and the one not granted
	// does not.
	allGrantedReadable := func(t *testing.T, when string, results map[string]string) {
		t.Helper()
		for _, p := range reads {
			if got := results[p]; p == notGranted && !strings.Contains(got, "permission denied") {
				t.Errorf("%s: %s is not granted and reads %q, want permission denied", when, p, got)
			} else if p != notGranted && got != "ok" {
				t.Errorf("%s: granted %s: %s", when, p, got)
			}
		}
	}

	t.Run("pinned", func(t *testing.T) {
		r := startSandboxedReader(t, grants, reads)
		allGrantedReadable(t, "before the reclaim", r.read())
		dropDentries(t)
		allGrantedReadable(t, "after drop_caches=2", r.read())
	})

	// The control: the same sandbox after the reader closed the launcher's
	// descriptors, i.e. the launcher before the fix: dropped until every
	// granted read is denied, up to five times (a dentry survives a drop
	// while anything refers to it). The per-pid entries are this process's
	// alone and must end denied. The dentry of a system-wide entry
	// (/proc/stat) is shared with every process on the machine that reads
	// it, so a busy machine may keep it cached: reported, not failed.
	t.Run("unpinned", func(t *testing.T) {
		r := startSandboxedReader(t, grants, reads)
		allGrantedReadable(t, "before the reclaim", r.read())
		r.send("unpin")
		var n int
		if _, err := fmt.Sscanf(r.line(), "closed %d", &n); err != nil || n != len(grants) {
			t.Fatalf("the reader closed %d O_PATH descriptors (%v), want one per procfs grant (%d)", n, err, len(grants))
		}
		var readable []string
		for attempt := 0; attempt < 5; attempt++ {
			dropDentries(t)
			results := r.read()
			readable = slices.DeleteFunc(slices.Clone(reads), func(p string) bool { return strings.Contains(results[p], "permission denied") })
			if len(readable) == 0 {
				break
			}
		}
		for _, p := range readable {
			if perPID(p) {
				t.Errorf("%s without the launcher's descriptors is still readable after drop_caches=2, want permission denied (else this test shows nothing)", p)
			} else {
				t.Logf("%s stayed cached through five drops (another process keeps reading it)", p)
			}
		}
	})
}

// TestPinProcfs: only what is on procfs is held, missing paths are skipped,
// duplicates held once, and every descriptor is O_PATH and survives exec.
func TestPinProcfs(t *testing.T) {
	tmp := t.TempDir()
	fds, err := pinProcfs([]string{"/proc/self/mountinfo", "/proc/self/net", tmp, "/sys/kernel", "/proc/no-such-file", "/proc/self/mountinfo"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(fds)
	var held []string
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, target)
		if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_PATH == 0 {
			t.Errorf("%s: not O_PATH (flags %#x)", target, fl)
		}
		if fdfl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fdfl&unix.FD_CLOEXEC != 0 {
			t.Errorf("%s: close-on-exec, the plugin would not inherit it", target)
		}
	}
	self := fmt.Sprintf("/proc/%d/", os.Getpid())
	if want := []string{self + "mountinfo", self + "net"}; !slices.Equal(held, want) {
		t.Errorf("held %v, want %v (resolved through /proc/self, procfs only, once each)", held, want)
	}
}

// TestPinProcfsOutOfDescriptors: a launch that cannot hold its grants says
// which limit to raise rather than leaving the plugin to fail at the first
// reclaim.
func TestPinProcfsOutOfDescriptors(t *testing.T) {
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	// No new descriptor at all, for the one call (nothing else in this
	// test binary opens files meanwhile: no test here is parallel).
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 0, Max: saved.Max}); err != nil {
		t.Fatal(err)
	}
	fds, err := pinProcfs([]string{"/proc/stat"})
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	closeAll(fds)
	if err == nil || !strings.Contains(err.Error(), "/proc/stat") || !strings.Contains(err.Error(), "limits.nofile") {
		t.Fatalf("pinProcfs with RLIMIT_NOFILE exhausted: %v, want an error naming the path and limits.nofile", err)
	}
}

// BenchmarkPinProcfs: what holding the guest plugin's five procfs grants
// adds to a launch (docs/design.md, Sandbox).
func BenchmarkPinProcfs(b *testing.B) {
	paths := []string{"/proc/stat", "/proc/pressure", "/proc/meminfo", "/proc/diskstats", "/proc/self/mountinfo"}
	for b.Loop() {
		fds, err := pinProcfs(paths)
		if err != nil {
			b.Fatal(err)
		}
		closeAll(fds)
	}
}
