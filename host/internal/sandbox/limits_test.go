package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"
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
