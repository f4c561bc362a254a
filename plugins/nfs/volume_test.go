package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
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
	keys, errs := superblockKeys("", blocks)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if keys[0] != keys[1] || keys[0] == keys[2] {
		t.Fatalf("superblock keys %v: the bind mount is the same superblock, the other mount is not", keys)
	}
	namer, _ := nfsvolume.New(`([^/]+)/*$`)
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

	named, err := nfsvolume.New(`^/export/(?P<volume_id>[a-z]+)$`)
	if err != nil {
		t.Fatal(err)
	}
	if got := named.Name("/export/home"); got != "home" {
		t.Errorf("named group: %q", got)
	}
	if got := named.Name("/other/x"); got != "/other/x" {
		t.Errorf("no match must fall back to the export path, got %q", got)
	}
	if got := namer.Name("/"); got != "/" {
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

// TestSuperblockKeysByIdentity: a block gets the st_dev of the mountinfo
// line with its mount point, fstype and device, wherever that line is; a
// bind mount gets its superblock's; a mount point mountinfo lists another
// number of times than mountstats does (mounted over between the reads)
// gets no key and an error naming it.
func TestSuperblockKeysByIdentity(t *testing.T) {
	ms := string(readTestdata(t, "mountstats-nfs3-tcp"))
	nfs := ms[strings.Index(ms, "device 10.20.0.7"):]
	at := func(mp string) string { return strings.Replace(nfs, "mounted on /home ", "mounted on "+mp+" ", 1) }
	text := "device proc mounted on /proc with fstype proc\n" + at("/home") + at("/srv/home") + at("/mnt/a")
	const src = "10.20.0.7:/export/home"
	for _, tc := range []struct {
		name, mountinfo string
		want            []string
		errFor          string
	}{
		{"other order, other lines between", "" +
			"30 1 0:60 / /mnt/a rw - nfs " + src + " rw\n" +
			"31 1 0:5 / /proc rw - proc proc rw\n" +
			"32 1 0:61 / /new rw - nfs " + src + " rw\n" +
			"33 1 0:50 / /srv/home rw - nfs " + src + " rw\n" +
			"34 1 0:50 / /home rw - nfs " + src + " rw\n",
			[]string{"dev:0:50", "dev:0:50", "dev:0:60"}, ""},
		{"mounted over between the reads", "" +
			"31 1 0:5 / /proc rw - proc proc rw\n" +
			"33 1 0:50 / /home rw - nfs " + src + " rw\n" +
			"34 1 0:50 / /srv/home rw - nfs " + src + " rw\n" +
			"35 1 0:60 / /mnt/a rw - nfs " + src + " rw\n" +
			"36 35 0:62 / /mnt/a rw - nfs " + src + " rw\n",
			[]string{"dev:0:50", "dev:0:50", ""}, "mount /mnt/a (fstype nfs, device 10.20.0.7:/export/home): mountinfo lists it 2 times, mountstats 1"},
		{"another fstype at the mount point", "" +
			"33 1 0:50 / /home rw - nfs " + src + " rw\n" +
			"34 1 0:50 / /srv/home rw - nfs " + src + " rw\n" +
			"35 1 0:60 / /mnt/a rw - nfs4 " + src + " rw\n",
			[]string{"dev:0:50", "dev:0:50", ""}, "mount /mnt/a (fstype nfs, device 10.20.0.7:/export/home): mountinfo lists it 0 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := procRoot(t, "", "", "")
			for name, data := range map[string]string{"mountstats": text, "mountinfo": tc.mountinfo} {
				if err := os.WriteFile(filepath.Join(root, "4242", name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			blocks, perrs := parseMountstats([]byte(text))
			if len(perrs) != 0 {
				t.Fatal(perrs)
			}
			keys, errs := superblockKeys(filepath.Join(root, "self", "mountstats"), blocks)
			if !slices.Equal(keys, tc.want) {
				t.Errorf("keys %q, want %q", keys, tc.want)
			}
			switch {
			case tc.errFor == "" && len(errs) != 0:
				t.Errorf("errors: %v", errs)
			case tc.errFor != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.errFor)):
				t.Errorf("errors %v, want one saying %q", errs, tc.errFor)
			}
		})
	}
}
