package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Every plugin starts with RLIMIT_CORE 0, whatever it inherits: a crashing
// collector dumps no core onto the node.
func TestLimitsForbidCoreDumps(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &old); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_CORE, &old)
	inherited := unix.Rlimit{Cur: 1 << 20, Max: old.Max}
	if old.Max < inherited.Cur {
		inherited.Cur = old.Max
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &inherited); err != nil || inherited.Cur == 0 {
		t.Skipf("cannot raise RLIMIT_CORE to test it (%v, max %d)", err, old.Max)
	}
	if err := limits(&Spec{}); err != nil {
		t.Fatal(err)
	}
	var got unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_CORE, &got)
	if got.Cur != 0 || got.Max != 0 {
		t.Fatalf("RLIMIT_CORE = %+v after limits, want 0/0", got)
	}
}

// Every plugin starts with RLIMIT_FSIZE at its limits.file_size and
// SIGXFSZ ignored: a write past the bound fails with EFBIG, and a plugin in
// any language (here dd, not Go) gets the error rather than the signal's
// default death. Without the bound the same write succeeds, so the test can
// fail. The limits are applied in a child (this test binary again), as the
// launcher applies them to itself: a lowered hard limit cannot be raised
// again without CAP_SYS_RESOURCE.
func TestLimitsBoundFileSize(t *testing.T) {
	if _, err := exec.LookPath("dd"); err != nil {
		t.Skip("no dd")
	}
	run := func(bound int64) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestLimitsFileSizeChild$", "-test.v")
		cmd.Env = append(os.Environ(), "LIMITS_FSIZE_CHILD="+strconv.FormatInt(bound, 10), "LIMITS_FSIZE_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with bound %d: %v\n%s", bound, err, out)
		}
		return string(out)
	}
	if out := run(0); !strings.Contains(out, "dd wrote 3145728 bytes, exit 0") {
		t.Fatalf("without a bound dd must write all 3 MiB:\n%s", out)
	}
	out := run(1 << 20)
	for _, want := range []string{"RLIMIT_FSIZE 1048576/1048576", "dd wrote 1048576 bytes, exit 1", "go write: file too large"} {
		if !strings.Contains(out, want) {
			t.Errorf("with a 1 MiB bound, want %q in:\n%s", want, out)
		}
	}
}

// TestLimitsFileSizeChild is TestLimitsBoundFileSize's child; it does
// nothing in a normal run.
func TestLimitsFileSizeChild(t *testing.T) {
	v := os.Getenv("LIMITS_FSIZE_CHILD")
	if v == "" {
		t.Skip("run by TestLimitsBoundFileSize")
	}
	bound, _ := strconv.ParseInt(v, 10, 64)
	dir := os.Getenv("LIMITS_FSIZE_DIR")
	if err := limits(&Spec{FileSizeBytes: bound}); err != nil {
		t.Fatal(err)
	}
	var got unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_FSIZE, &got)
	t.Logf("RLIMIT_FSIZE %d/%d", got.Cur, got.Max)
	path := filepath.Join(dir, "dd")
	cmd := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=65536", "count=48") // 3 MiB
	cmd.Run()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("dd died of %v: SIGXFSZ must be ignored", ws.Signal())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dd wrote %d bytes, exit %d", fi.Size(), ws.ExitStatus())
	// This process (Go) too: an error, and alive.
	f, err := os.Create(filepath.Join(dir, "self"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 2<<20)); errors.Is(err, syscall.EFBIG) {
		t.Logf("go write: %v", syscall.EFBIG)
	} else {
		t.Logf("go write: %v", err)
	}
}

// The manifest's limits.file_size, or the default, reaches the Spec.
func TestResolveLimitsFileSize(t *testing.T) {
	for in, want := range map[string]int64{"": 64 << 20, "1GiB": 1 << 30, "512KiB": 512 << 10} {
		var s Spec
		if err := resolveLimits(&s, manifest.Limits{FileSize: in}); err != nil {
			t.Fatal(err)
		}
		if s.FileSizeBytes != want {
			t.Errorf("file_size %q: %d, want %d", in, s.FileSizeBytes, want)
		}
	}
}
