package main

import (
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
)

// TestNFSVolumesFromMounts: a server and NFS version with one export
// mounted (twice, as a bind or read-only mount) is named by it; two
// exports of one server and version are ambiguous and get volume_id "";
// the same server's other version is told apart; escapes are undone; a
// mount without addr= cannot be matched to an address and is skipped.
func TestNFSVolumesFromMounts(t *testing.T) {
	f, err := os.Open("testdata/mounts-nfs-volumes")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mounts, err := parseNFSMounts(f)
	if err != nil {
		t.Fatal(err)
	}
	a5, a7, a9 := netip.MustParseAddr("10.20.0.5"), netip.MustParseAddr("10.20.0.7"), netip.MustParseAddr("fd00::9")
	want := []nfsMount{
		{a5, 4, "/vol/datasets"},
		{a5, 4, "/vol/datasets"},
		{a7, 3, "/export/home"},
		{a7, 3, "/export/scratch"},
		{a7, 4, "/export/models"},
		{a9, 4, "/srv/my data"},
	}
	if !reflect.DeepEqual(mounts, want) {
		t.Fatalf("mounts:\n got %v\nwant %v", mounts, want)
	}
	namer, err := nfsvolume.New(nfsvolume.DefaultRegex)
	if err != nil {
		t.Fatal(err)
	}
	vols := buildNFSVolumes(mounts, namer)
	for _, c := range []struct {
		server  netip.Addr
		version uint32
		want    string
	}{
		{a5, 4, "datasets"},
		{a5, 3, ""}, // nothing mounted with v3
		{a7, 3, ""}, // home and scratch: ambiguous
		{a7, 4, "models"},
		{a9, 4, "my data"},
		{netip.MustParseAddr("10.20.0.99"), 4, ""},
	} {
		if got := vols.volumeID(c.server, c.version); got != c.want {
			t.Errorf("volumeID(%s, %d) = %q, want %q", c.server, c.version, got, c.want)
		}
	}
}

// TestNFSVolumeUnknownVersionIsAmbiguous: a mount whose version is not
// known could carry either version's calls, so neither is named.
func TestNFSVolumeUnknownVersionIsAmbiguous(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	namer, _ := nfsvolume.New(nfsvolume.DefaultRegex)
	vols := buildNFSVolumes([]nfsMount{{a, 4, "/v/one"}, {a, 0, "/v/two"}}, namer)
	if got := vols.volumeID(a, 4); got != "" {
		t.Errorf("volumeID = %q, want \"\" beside a mount of unknown version", got)
	}
}

func TestVolumeNamerGroups(t *testing.T) {
	for _, c := range []struct{ expr, export, want string }{
		{nfsvolume.DefaultRegex, "/vol/datasets/", "datasets"},
		{`^/tenants/(?P<tenant>[^/]+)/(?P<volume_id>[^/]+)`, "/tenants/acme/vol7/sub", "vol7"},
		{`^/nomatch/(.*)`, "/vol/x", "/vol/x"},
	} {
		n, err := nfsvolume.New(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Name(c.export); got != c.want {
			t.Errorf("%s on %s = %q, want %q", c.expr, c.export, got, c.want)
		}
	}
}

func FuzzParseNFSMounts(f *testing.F) {
	data, err := os.ReadFile("testdata/mounts-nfs-volumes")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add(`a:\0 b nfs addr=1.2.3.4,vers=4.x 0 0`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, m := range mustParse(t, s) {
			if !m.server.IsValid() {
				t.Fatalf("mount without a server address: %+v", m)
			}
		}
	})
}

func mustParse(t *testing.T, s string) []nfsMount {
	m, err := parseNFSMounts(strings.NewReader(s))
	if err != nil {
		t.Skip(err) // a line longer than the scanner's limit
	}
	return m
}
