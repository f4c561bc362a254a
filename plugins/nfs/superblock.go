package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/prometheus/procfs"
)

// Which mount blocks are one superblock.
//
// mountstats prints a block per mount, not per superblock: a bind mount, or
// one mount seen through several mount namespaces, prints the same
// superblock's statistics again, while the same export mounted a second
// time with other options (read-only, another sec=) is a superblock of its
// own with its own counters. mountinfo, read right after mountstats, names
// each mount's superblock by its st_dev ("0:53"); both files list the
// namespace's mounts in the same order, so block i of mountstats is line i
// of mountinfo (checked by mount point). Where mountinfo is not available
// (a mountstats_path not of procfs' shape, or no mountinfo next to it),
// blocks with identical statistics are taken for one superblock.

// superblockKeys returns a key per block: "dev:<st_dev>" from mountinfo,
// else "stats:<n>" shared by blocks with identical counters. err reports a
// mountinfo that exists but could not be read or matched.
func superblockKeys(mountstatsPath string, blocks []*block) (keys []string, err error) {
	devs, err := mountDevices(mountstatsPath)
	keys = make([]string, len(blocks))
	var byContent []*block
	for i, b := range blocks {
		if devs != nil && b.ordinal < len(devs) && devs[b.ordinal].mountPoint == b.mountPoint {
			keys[i] = "dev:" + devs[b.ordinal].dev
			continue
		}
		if devs != nil && err == nil {
			err = fmt.Errorf("mountinfo does not list mount %s where mountstats does (mounted or unmounted between the reads?): identified by its statistics", unescapeOctal(b.mountPoint))
		}
		n := slices.IndexFunc(byContent, func(o *block) bool { return sameCounters(o, b) })
		if n < 0 {
			n = len(byContent)
			byContent = append(byContent, b)
		}
		keys[i] = fmt.Sprintf("stats:%d", n)
	}
	return keys, err
}

type mountDevice struct{ mountPoint, dev string }

// mountDevices reads the mountinfo next to mountstats with procfs. nil
// without error: there is none (or the path is not procfs-shaped).
func mountDevices(mountstatsPath string) ([]mountDevice, error) {
	p, ok := procfsProc(mountstatsPath)
	if !ok {
		return nil, nil
	}
	infos, err := p.MountInfo()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	out := make([]mountDevice, len(infos))
	for i, m := range infos {
		out[i] = mountDevice{mountPoint: m.MountPoint, dev: m.MajorMinorVer}
	}
	return out, nil
}

// procfsProc maps <root>/<pid|self>/mountstats to a procfs.Proc.
func procfsProc(path string) (procfs.Proc, bool) {
	if filepath.Base(path) != "mountstats" {
		return procfs.Proc{}, false
	}
	dir := filepath.Dir(path)
	root, pid := filepath.Dir(dir), filepath.Base(dir)
	pfs, err := procfs.NewFS(root)
	if err != nil {
		return procfs.Proc{}, false
	}
	var p procfs.Proc
	if pid == "self" {
		p, err = pfs.Self()
	} else {
		var n int
		if _, serr := fmt.Sscanf(pid, "%d", &n); serr != nil || fmt.Sprint(n) != pid {
			return procfs.Proc{}, false
		}
		p, err = pfs.Proc(n)
	}
	return p, err == nil
}

func sameCounters(a, b *block) bool {
	eq := func(x, y fields) bool { return x.bad == y.bad && slices.Equal(x.v, y.v) }
	if !eq(a.events, b.events) || !eq(a.bytes, b.bytes) || len(a.ops) != len(b.ops) {
		return false
	}
	for i := range a.ops {
		if a.ops[i].name != b.ops[i].name || !eq(a.ops[i].fields, b.ops[i].fields) {
			return false
		}
	}
	return true
}

// history keeps every volume's exported counters monotonic while its
// superblocks come and go. A volume's counter is the sum over its current
// superblocks plus the last reading of every superblock that went away (or
// was replaced: a field below its previous reading means a new superblock
// under the old key). So unmounting one of two mounts of an export neither
// drops the counters (no phantom rate() spike) nor loses the traffic it
// carried. The departed sums live only in the plugin: a plugin restart, or
// a volume that disappears entirely, starts from the kernel's values again
// (a counter reset, as for any restarted exporter).
type history struct {
	vols map[string]*volumeHistory // by volume_id
}

type volumeHistory struct {
	last     map[string]*counters // superblock key → reading of the previous scrape
	departed *counters
}

func newHistory() *history { return &history{vols: map[string]*volumeHistory{}} }

// totals returns the exported counters of each volume and records this
// scrape; volumes absent from vols are forgotten.
func (h *history) totals(vols []*volume) []*counters {
	out := make([]*counters, len(vols))
	seen := make(map[string]bool, len(vols))
	for i, v := range vols {
		seen[v.id] = true
		vh := h.vols[v.id]
		if vh == nil {
			vh = &volumeHistory{departed: &counters{ops: map[string]fields{}}}
			h.vols[v.id] = vh
		}
		for k, prev := range vh.last {
			if cur, ok := v.supers[k]; !ok || cur.decreased(prev) {
				vh.departed.add(prev)
			}
		}
		total := vh.departed.clone()
		last := make(map[string]*counters, len(v.supers))
		for _, k := range v.order {
			total.add(v.supers[k])
			last[k] = v.supers[k]
		}
		vh.last = last
		out[i] = total
	}
	for id := range h.vols {
		if !seen[id] {
			delete(h.vols, id)
		}
	}
	return out
}
