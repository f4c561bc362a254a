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
// each mount's superblock by its st_dev ("0:53").
//
// A block is matched to its mountinfo line by identity, never by position:
// both files print a mount's point, fstype and device with the same kernel
// functions and escapes (fs/proc_namespace.c show_vfsstat and
// show_mountinfo), so a block is the mountinfo line with its mount point,
// fstype and source. A mount or unmount between the two reads makes the
// files disagree; by position, every later block would meet another
// mount's line. A block whose identity mountinfo does not list (unmounted
// after mountstats was read), or lists another number of times than
// mountstats does (the same export mounted on the same point again), has
// no superblock key: its volume is left out of that scrape (see history)
// rather than given a key of another kind, which the history would take
// for a new superblock and add to the old one's reading. A line mountinfo
// has and mountstats does not (mounted after mountstats was read) matters
// to no block.
//
// Where mountinfo is not available at all (a mountstats_path not of
// procfs' shape, or no mountinfo next to it), blocks with identical
// statistics are taken for one superblock, in every scrape alike.

// superblockKeys returns a key per block: "dev:<st_dev>" from mountinfo,
// else (no mountinfo) "stats:<n>" shared by blocks with identical counters.
// A block that has no key ("") is not to be exported this scrape; errs say
// which and why: mountinfo unreadable (every block), or a mount it does not
// list where mountstats does.
func superblockKeys(mountstatsPath string, blocks []*block) (keys []string, errs []error) {
	keys = make([]string, len(blocks))
	devs, err := mountDevices(mountstatsPath)
	if err != nil {
		if len(blocks) > 0 {
			errs = append(errs, fmt.Errorf("%w: no NFS volume exported this scrape (their superblocks cannot be told apart without it)", err))
		}
		return keys, errs
	}
	if devs == nil {
		var byContent []*block
		for i, b := range blocks {
			n := slices.IndexFunc(byContent, func(o *block) bool { return sameCounters(o, b) })
			if n < 0 {
				n = len(byContent)
				byContent = append(byContent, b)
			}
			keys[i] = fmt.Sprintf("stats:%d", n)
		}
		return keys, nil
	}
	byIdentity := map[mountIdentity][]string{} // st_dev of each mountinfo line, in order
	for _, d := range devs {
		byIdentity[d.mountIdentity] = append(byIdentity[d.mountIdentity], d.dev)
	}
	inStats := map[mountIdentity]int{}
	for _, b := range blocks {
		inStats[b.identity()]++
	}
	next := map[mountIdentity]int{}
	for i, b := range blocks {
		id := b.identity()
		lines := byIdentity[id]
		if len(lines) != inStats[id] {
			errs = append(errs, fmt.Errorf("mount %s (fstype %s, device %s): mountinfo lists it %d times, mountstats %d (mounted or unmounted between the two reads): its volume is not exported this scrape",
				unescapeOctal(b.mountPoint), b.fstype, unescapeOctal(b.device), len(lines), inStats[id]))
			continue
		}
		keys[i] = "dev:" + lines[next[id]]
		next[id]++
	}
	return keys, errs
}

// mountIdentity is what both mountstats and mountinfo print of a mount, as
// printed (octal escapes kept).
type mountIdentity struct{ mountPoint, fstype, source string }

func (b *block) identity() mountIdentity {
	return mountIdentity{mountPoint: b.mountPoint, fstype: b.fstype, source: b.device}
}

type mountDevice struct {
	mountIdentity
	dev string
}

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
		out[i] = mountDevice{mountIdentity{mountPoint: m.MountPoint, fstype: m.FSType, source: m.Source}, m.MajorMinorVer}
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
// (a counter reset, as for any restarted exporter). A volume left out of a
// scrape because a block of it had no superblock key (unmatched) is neither
// updated nor forgotten: its superblocks are not booked as departed, so
// when it is back its counters are the kernel's again, not twice them.
type history struct {
	vols map[string]*volumeHistory // by volume_id
}

type volumeHistory struct {
	last     map[string]*counters // superblock key → reading of the previous scrape
	departed *counters
}

func newHistory() *history { return &history{vols: map[string]*volumeHistory{}} }

// totals returns the exported counters of each volume and records this
// scrape; volumes absent from vols are forgotten. An unmatched volume gets
// nil and keeps its history.
func (h *history) totals(vols []*volume) []*counters {
	out := make([]*counters, len(vols))
	seen := make(map[string]bool, len(vols))
	for i, v := range vols {
		seen[v.id] = true
		if v.unmatched {
			continue
		}
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
