package main

import "testing"

func TestKernelVersionCode(t *testing.T) {
	for release, want := range map[string]uint32{
		"6.1.0-57-amd64":                6<<16 | 1<<8,
		"6.18.44-fc-v657":               6<<16 | 18<<8 | 44,
		"5.15.153.1-microsoft-standard": 5<<16 | 15<<8 | 153,
		"4.19.300":                      4<<16 | 19<<8 | 255, // the patch level saturates, as in the kernel's macro
		"6.10":                          6<<16 | 10<<8,
	} {
		got, err := kernelVersionCode(release)
		if err != nil || got != want {
			t.Errorf("kernelVersionCode(%q) = %#x, %v; want %#x", release, got, err, want)
		}
	}
	for _, bad := range []string{"", "linux", "6", "-6.1", "300.1.0"} {
		if got, err := kernelVersionCode(bad); err == nil {
			t.Errorf("kernelVersionCode(%q) = %#x, want an error", bad, got)
		}
	}
}
