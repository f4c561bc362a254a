package sysfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func write(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadAttr(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"4: ACTIVE\n":                    "4: ACTIVE",
		"QEMU NVMe Ctrl         \n":      "QEMU NVMe Ctrl",
		"\x00\x00 abc\x00\n":             "abc",
		"a\xffb\n":                       "a\uFFFDb",
		"":                               "",
		strings.Repeat("x", MaxAttrSize): strings.Repeat("x", MaxAttrSize),
	} {
		p := write(t, dir, "attr", content)
		got, err := ReadAttr(p)
		if err != nil || got != want {
			t.Errorf("ReadAttr(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
}

func TestReadAttrRefuses(t *testing.T) {
	dir := t.TempDir()
	big := write(t, dir, "big", strings.Repeat("1", MaxAttrSize+1))
	if _, err := ReadAttr(big); err == nil || !strings.Contains(err.Error(), big) {
		t.Errorf("oversized attribute: err = %v, want an error naming %s", err, big)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := ReadAttr(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing attribute: err = %v", err)
	}
	if _, err := ReadAttr(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: err = %v", err)
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"LAB123              \n": "LAB123",
		"S64FNE0T712345\n":       "S64FNE0T712345",
		"\xff\xfeAB\x00\x00  \n": "\uFFFDAB", // one replacement per invalid run
		" \t\n":                  "",
		"a b":                    "a b",
	} {
		if got := Clean([]byte(in)); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseCounter(t *testing.T) {
	good := map[string]uint64{"0\n": 0, "42\n": 42, "18446744073709551615\n": 1<<64 - 1, "7": 7, "007\n": 7}
	for in, want := range good {
		if v, err := ParseCounter([]byte(in)); err != nil || v != want {
			t.Errorf("ParseCounter(%q) = %d, %v", in, v, err)
		}
	}
	for _, in := range []string{"", "\n", "-1\n", "0x10\n", "18446744073709551616\n", "abc\n", "1 2\n", " 1\n", "1\n\n", "\x00\x01", "+5", "1\r\n"} {
		if v, err := ParseCounter([]byte(in)); err == nil {
			t.Errorf("ParseCounter(%q) = %d, want error", in, v)
		}
	}
	for _, in := range []string{"N/A (no PMA)\n", "N/A"} {
		if _, err := ParseCounter([]byte(in)); !errors.Is(err, ErrNotAvailable) {
			t.Errorf("ParseCounter(%q): %v, want ErrNotAvailable", in, err)
		}
	}
}

func TestReadCounter(t *testing.T) {
	dir := t.TempDir()
	var buf Buffer
	if v, err := buf.ReadCounter(write(t, dir, "ok", "3410229118\n")); err != nil || v != 3410229118 {
		t.Errorf("ReadCounter = %d, %v", v, err)
	}
	if _, err := buf.ReadCounter(write(t, dir, "na", "N/A (no PMA)\n")); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("N/A: %v", err)
	}
	bad := write(t, dir, "bad", "hello\n")
	if _, err := buf.ReadCounter(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("garbage: err = %v, want an error naming %s", err, bad)
	}
	// The buffer is reused: a shorter second read does not see the first.
	if v, err := buf.ReadCounter(write(t, dir, "short", "5\n")); err != nil || v != 5 {
		t.Errorf("after a longer read: %d, %v", v, err)
	}
}

// A counter read allocates only the error path's memory: the collect loop
// of the rdma plugin reads thousands of these per scrape.
func TestReadCounterDoesNotAllocate(t *testing.T) {
	p := write(t, t.TempDir(), "c", "123456\n")
	var buf Buffer
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := buf.ReadCounter(p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the path's conversion to a C string
		t.Errorf("%.0f allocations per counter read", allocs)
	}
}

func FuzzParseCounter(f *testing.F) {
	for _, s := range []string{"0\n", "12\n", "3410229118\n", "18446744073709551615\n", "N/A (no PMA)\n", "-1\n", "0x10\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseCounter(b)
		if err != nil {
			return
		}
		// Whatever is accepted is a decimal number and nothing else.
		s := strings.TrimLeft(strings.TrimSuffix(string(b), "\n"), "0")
		if s == "" {
			s = "0"
		}
		if s != fmt.Sprint(v) {
			t.Errorf("ParseCounter(%q) = %d", b, v)
		}
	})
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"LAB123              \n", "7.2.22  \n", "\xff\x00 x \t", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := Clean(b)
		if !utf8.ValidString(s) {
			t.Fatalf("invalid UTF-8 label value %q", s)
		}
		if s != strings.TrimSpace(s) || strings.HasPrefix(s, "\x00") || strings.HasSuffix(s, "\x00") {
			t.Fatalf("Clean(%q) = %q keeps padding", b, s)
		}
	})
}

func BenchmarkReadCounter(b *testing.B) {
	p := write(b, b.TempDir(), "c", "3410229118\n")
	var buf Buffer
	for b.Loop() {
		if _, err := buf.ReadCounter(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOSReadFile(b *testing.B) {
	p := write(b, b.TempDir(), "c", "3410229118\n")
	for b.Loop() {
		raw, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ParseCounter(raw); err != nil {
			b.Fatal(err)
		}
	}
}
