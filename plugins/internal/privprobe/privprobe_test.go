//go:build linux

package privprobe

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Unconfined as root every attempt gets past the step the plugins'
// filters deny: the programs load (so the verifier accepts them and an
// EPERM in the host's tests is the filter's), the mount reaches its
// missing target, the ioctl runs.
func TestTryUnconfined(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loading tracing programs needs root")
	}
	got := Try()
	want := map[string]float64{"bpf_send_signal": 0, "bpf_probe_read_user": 0, "mount": float64(unix.ENOENT), "ioctl_fionread": 0}
	for a, w := range want {
		if got[a] != w {
			t.Errorf("%s: errno %v, want %v", a, got[a], w)
		}
	}
	if len(got) != len(Attempts) {
		t.Errorf("answers for %d attempts, Attempts lists %d", len(got), len(Attempts))
	}
}
