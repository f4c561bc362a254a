package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestSeriesLinesAndFamilyCount(t *testing.T) {
	body := []byte(`# HELP rdma_port_rcv_data_total Port received data.
# TYPE rdma_port_rcv_data_total counter
rdma_port_rcv_data_total{device="mlx5_0",port="1"} 1
rdma_port_rcv_data_total{device="mlx5_0",port="2"} 2
# TYPE rdma_port_info gauge
rdma_port_info{device="mlx5_0",port="1"} 1
# TYPE go_goroutines gauge
go_goroutines 12
`)
	for _, c := range []struct {
		prefixes       []string
		series, family int
	}{
		{nil, 4, 0},
		{[]string{"rdma_"}, 3, 2},
		{[]string{"rdma_port_rcv", "go_"}, 3, 2},
		{[]string{"node_"}, 0, 0},
	} {
		if got := seriesLines(body, c.prefixes...); got != c.series {
			t.Errorf("seriesLines(%q) = %d, want %d", c.prefixes, got, c.series)
		}
		if got := familyCount(body, c.prefixes...); got != c.family {
			t.Errorf("familyCount(%q) = %d, want %d", c.prefixes, got, c.family)
		}
	}
}

// The CPU clock of a process is read in nanoseconds, for this process and
// another one (a child that burns CPU), never below what /proc/<pid>/stat
// said just before in ticks; a process that is gone is an error.
func TestProcessCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid} {
		// Until the process has used a tick or more.
		for i := 0; ; i++ {
			st, err := readStat(pid)
			if err != nil {
				t.Fatal(err)
			}
			if pid == os.Getpid() {
				for x := 0; x < 1e6; x++ {
					sink += x
				}
			}
			if st.utime+st.stime == 0 {
				if i > 10000 {
					t.Fatalf("pid %d: no CPU time counted", pid)
				}
				time.Sleep(time.Millisecond)
				continue
			}
			got, err := processCPU(pid)
			if err != nil {
				t.Fatal(err)
			}
			if ticks := float64(st.utime+st.stime) / clockTicks; got < ticks {
				t.Errorf("pid %d: CPU clock %.6f s below /proc/%d/stat's %.2f s", pid, got, pid, ticks)
			}
			if got == float64(int64(got*clockTicks))/clockTicks {
				t.Logf("pid %d: %.6f s is a whole number of ticks (the /proc fallback?)", pid, got)
			}
			break
		}
	}
	if _, err := cpuSeconds([]int{1<<22 + 1}); err == nil {
		t.Error("cpuSeconds of a pid that does not exist: no error")
	}
}

var sink int
