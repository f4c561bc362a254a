package hosttest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestTrustedDirIsWalkableAtEveryLevel(t *testing.T) {
	old := syscall.Umask(0o077) // one that would shut the plugins' user out
	defer syscall.Umask(old)
	root := TrustedDir(t, "hosttest", filepath.Join("node", "run", "x"), "plugins")
	for _, d := range []string{root, filepath.Join(root, "node"), filepath.Join(root, "node", "run"), filepath.Join(root, "node", "run", "x"), filepath.Join(root, "plugins")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", d, fi.Mode().Perm())
		}
	}
}

func TestValue(t *testing.T) {
	mfs := Parse(t, `# TYPE a_total counter
a_total{dev="x",port="1"} 3
a_total{dev="y",port="1"} 4
# TYPE b gauge
b 7
`)
	for _, tc := range []struct {
		family string
		labels []string
		want   float64
		ok     bool
	}{
		{"a_total", []string{"dev", "y"}, 4, true},
		{"a_total", []string{"port", "1"}, 3, true}, // the first that matches
		{"a_total", []string{"dev", "z"}, 0, false},
		{"b", nil, 7, true},
		{"c", nil, 0, false},
	} {
		if got, ok := Value(mfs, tc.family, tc.labels...); got != tc.want || ok != tc.ok {
			t.Errorf("Value(%s, %v) = %v, %v; want %v, %v", tc.family, tc.labels, got, ok, tc.want, tc.ok)
		}
	}
}
