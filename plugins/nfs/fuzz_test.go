package main

import (
	"strings"
	"testing"
)

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

// FuzzParseNetTCP: never panics; every returned row has valid ports.
func FuzzParseNetTCP(f *testing.F) {
	for _, name := range []string{"tcp-synthetic", "tcp6-synthetic", "tcp-real-6.1", "tcp6-real-6.1"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		socks, _ := parseNetTCP(data)
		for _, s := range socks {
			if s.localPort > 65535 || s.remotePort > 65535 || s.localIP == nil || s.remoteIP == nil {
				t.Fatalf("bad row %+v", s)
			}
			_ = s.conn()
		}
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
