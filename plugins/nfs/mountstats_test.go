package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestProcfsAndTolerantAgree: on every file procfs accepts, the fallback
// parser yields exactly what procfs yields.
func TestProcfsAndTolerantAgree(t *testing.T) {
	for _, f := range []string{"mountstats-nfs4.2-nconnect4", "mountstats-nfs3-tcp", "mountstats-mixed",
		"mountstats-real-6.1", "mountstats-real-6.1-labrun1", "mountstats-oldkernel-transports"} {
		root := procRoot(t, f, "", "")
		p, ok := procfsProc(filepath.Join(root, "self", "mountstats"))
		if !ok {
			t.Fatalf("%s: procfs path not recognised", f)
		}
		want, err := procfsMountStats(p)
		if err != nil {
			t.Fatalf("%s: procfs: %v", f, err)
		}
		got, errs := parseMountstatsTolerant(readTestdata(t, f))
		if len(errs) != 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: tolerant parser differs from procfs", f)
			for i := range min(len(want), len(got)) {
				if !reflect.DeepEqual(want[i], got[i]) {
					t.Errorf("first difference at mount %d (%s):\nprocfs   %+v\ntolerant %+v", i, want[i].Mount, want[i].Stats, got[i].Stats)
					break
				}
			}
		}
	}
	// And the file procfs rejects is really rejected (else the future
	// golden would not test the fallback).
	root := procRoot(t, "mountstats-future", "", "")
	p, _ := procfsProc(filepath.Join(root, "self", "mountstats"))
	if _, err := procfsMountStats(p); err == nil {
		t.Error("procfs accepted mountstats-future; the fallback is untested")
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`10.0.0.1:/a\040b`: "10.0.0.1:/a b",
		`/mnt/x\134y\011z`: "/mnt/x\\y\tz",
		`trailing\04`:      `trailing\04`,
		`plain`:            "plain",
		`\040\040`:         "  ",
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseMountstats: the fallback parser never panics, returns a mount
// per well-formed header, and keeps every lane position.
func FuzzParseMountstats(f *testing.F) {
	for _, name := range []string{"mountstats-nfs4.2-nconnect4", "mountstats-nfs3-tcp", "mountstats-mixed",
		"mountstats-real-6.1", "mountstats-oldkernel-transports", "mountstats-future"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte("device a:/b mounted on /c with fstype nfs statvers=1.1\n\txprt:\trdma 0 1\n\txprt:\n\tper-op statistics\n\tX:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mounts, _ := parseMountstatsTolerant(data)
		headers := 0
		for _, line := range strings.Split(string(data), "\n") {
			ss := strings.Fields(line)
			if len(ss) >= 8 && ss[0] == "device" && !strings.HasPrefix(line, "\t") &&
				ss[2] == "mounted" && ss[3] == "on" && ss[5] == "with" && ss[6] == "fstype" {
				headers++
			}
		}
		if len(mounts) != headers {
			t.Fatalf("%d mounts for %d headers", len(mounts), headers)
		}
		namer, _ := newVolumeNamer(`([^/]+)/*$`)
		vols := buildVolumes(mounts, namer, 2049)
		seen := map[string]bool{}
		for _, v := range vols {
			if seen[v.id] {
				t.Fatalf("duplicate volume_id %q", v.id)
			}
			seen[v.id] = true
		}
		joinSockets(vols, nil, 2049)
	})
}

func FuzzUnescapeOctal(f *testing.F) {
	f.Add(`a\040b\134`)
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescapeOctal(s); len(got) > len(s) {
			t.Fatalf("grew: %q -> %q", s, got)
		}
	})
}
