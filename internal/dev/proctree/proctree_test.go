package proctree

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a ')' in it, as the kernel prints it.
	st, err := parseStat("4242 (a b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 1 0 9 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != 17 || st.UTime != 250 || st.STime != 31 {
		t.Fatalf("got %+v, want ppid 17, utime 250, stime 31", st)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 17"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestBelow(t *testing.T) {
	// 1 → 10 → 11 → 12, 10 → 13, 1 → 20; 30's parent is not listed.
	parent := map[int]int{10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 30: 99}
	if got, want := below(parent, 10), []int{11, 12, 13}; !slices.Equal(got, want) {
		t.Fatalf("below 10: %v, want %v", got, want)
	}
	if got := below(parent, 12); len(got) != 0 {
		t.Fatalf("below a leaf: %v", got)
	}
}

// A real tree: a shell whose child sleeps, and the CPU clock of a process
// that spins.
func TestRealTree(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var kids []int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if kids = Descendants(cmd.Process.Pid); len(kids) == 1 {
			break
		}
	}
	if len(kids) != 1 {
		t.Fatalf("descendants of sh: %v, want the one sleep", kids)
	}
	if got := Children(cmd.Process.Pid); !slices.Equal(got, kids) {
		t.Fatalf("children %v, descendants %v", got, kids)
	}
	if !slices.Contains(Descendants(os.Getpid()), kids[0]) {
		t.Fatalf("the sleep is not below the test process")
	}

	before, err := CPUSum([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i
	}
	after, err := CPUSum([]int{os.Getpid()})
	if err != nil || after <= before {
		t.Fatalf("CPU did not grow while spinning: %v → %v (%v, %d)", before, after, err, x)
	}
	if _, err := CPUSum([]int{1 << 30}); err == nil {
		t.Fatal("no error for a pid that cannot exist")
	}
}

// The CPU clock of a process is read in nanoseconds, for this process and
// another one (a child that burns CPU), never below what /proc/<pid>/stat
// said just before in ticks; a process that is gone is an error.
func TestCPUNotBelowTicks(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid} {
		// Until the process has used a tick or more.
		for i := 0; ; i++ {
			st, err := ReadStat(pid)
			if err != nil {
				t.Fatal(err)
			}
			if pid == os.Getpid() {
				for x := 0; x < 1e6; x++ {
					sink += x
				}
			}
			if st.UTime+st.STime == 0 {
				if i > 10000 {
					t.Fatalf("pid %d: no CPU time counted", pid)
				}
				time.Sleep(time.Millisecond)
				continue
			}
			got, err := CPU(pid)
			if err != nil {
				t.Fatal(err)
			}
			if ticks := float64(st.UTime+st.STime) / clockTicks; got < ticks {
				t.Errorf("pid %d: CPU clock %.6f s below /proc/%d/stat's %.2f s", pid, got, pid, ticks)
			}
			if got == float64(int64(got*clockTicks))/clockTicks {
				t.Logf("pid %d: %.6f s is a whole number of ticks (the /proc fallback?)", pid, got)
			}
			break
		}
	}
	if _, err := CPUSum([]int{1<<22 + 1}); err == nil {
		t.Error("CPUSum of a pid that does not exist: no error")
	}
}

var sink int
