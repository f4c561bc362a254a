package main

import (
	"strings"
	"testing"
)

// TestVolumeRules: identical blocks (one superblock) count once; another
// superblock of the same server/version is summed; another version is
// kept apart under volume_id@mountpoint; the regex picks the id.
func TestVolumeRules(t *testing.T) {
	block := string(readTestdata(t, "mountstats-nfs3-tcp"))
	i := strings.Index(block, "device 10.20.0.7")
	nfs := block[i:]
	bind := strings.Replace(nfs, "mounted on /home ", "mounted on /srv/home ", 1)
	other := strings.Replace(strings.Replace(nfs, "mounted on /home ", "mounted on /pod/home ", 1),
		"READ: 4210998 4211002", "READ: 9999999 9999999", 1)
	v4 := strings.Replace(strings.Replace(nfs, "fstype nfs statvers", "fstype nfs4 statvers", 1), "vers=3,", "vers=4.2,", 1)
	v4 = strings.Replace(v4, "mounted on /home ", "mounted on /mnt/v4 ", 1)
	blocks, errs := parseMountstats([]byte(nfs + bind + other + v4))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	keys, err := superblockKeys("", blocks)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0] != keys[1] || keys[0] == keys[2] {
		t.Fatalf("superblock keys %v: the bind mount is the same superblock, the other mount is not", keys)
	}
	namer, _ := newVolumeNamer(`([^/]+)/*$`)
	vols := buildVolumes(blocks, keys, namer, 2049)
	if len(vols) != 2 || vols[0].id != "home" || vols[1].id != "home@/mnt/v4" {
		t.Fatalf("volumes: %v", ids(vols))
	}
	totals := newHistory().totals(vols)
	if got, _ := totals[0].ops["read"].get(opRequests); got != 4210998+9999999 {
		t.Errorf("READ ops = %d, want the sum of the two superblocks %d", got, 4210998+9999999)
	}
	if got, _ := totals[0].ops["read"].get(opTransmissions); got != 4211002+9999999 {
		t.Errorf("READ trans = %d", got)
	}
	if len(vols[0].mounts) != 3 {
		t.Errorf("mount points: %+v", vols[0].mounts)
	}
	if len(vols[0].lanes) != 1 || vols[0].lanes[0].port() != 833 || vols[0].lanes[0].srcportConflict {
		t.Errorf("lanes: %+v", vols[0].lanes)
	}

	named, err := newVolumeNamer(`^/export/(?P<volume_id>[a-z]+)$`)
	if err != nil {
		t.Fatal(err)
	}
	if got := named.name("/export/home"); got != "home" {
		t.Errorf("named group: %q", got)
	}
	if got := named.name("/other/x"); got != "/other/x" {
		t.Errorf("no match must fall back to the export path, got %q", got)
	}
	if got := namer.name("/"); got != "/" {
		t.Errorf("root export: %q", got)
	}
}

func ids(vs []*volume) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.id)
	}
	return out
}

func TestSplitDevice(t *testing.T) {
	for in, want := range map[string][2]string{
		"10.20.0.5:/vol/datasets": {"10.20.0.5", "/vol/datasets"},
		"[fd00::5]:/export":       {"fd00::5", "/export"},
		"filer:/":                 {"filer", "/"},
		"weird":                   {"", "weird"},
	} {
		s, e := splitDevice(in)
		if s != want[0] || e != want[1] {
			t.Errorf("splitDevice(%q) = %q, %q", in, s, e)
		}
	}
}
