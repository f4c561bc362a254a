package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/plexporter/plexporter/plugins/internal/rdmasysfs"
	"github.com/plexporter/plexporter/plugins/internal/sysfs"
	"github.com/plexporter/plexporter/sdk"
)

// sysfsWorkers bounds how many devices are read at the same time.
const sysfsWorkers = 8

type counterSample struct {
	name  string
	value uint64
}

type portData struct {
	num                 int
	netdev, linkLayer   string
	state, physState    string
	linkWidth, linkRate string
	counters            []counterSample // counters/ then hw_counters/, without lifespan
	lifespan            uint64
	hasLifespan         bool
	hwNames             names // the names in hw_counters/ (sysfs wins over netlink)
}

// names is a directory listing in name order (sysfs.Dir.Names: never
// modified, so a port keeps its directory's without a copy).
type names []string

func (n names) has(name string) bool {
	_, found := slices.BinarySearch(n, name)
	return found
}

type deviceData struct {
	name     string
	pciAddr  string
	isVF     bool
	pfDevice string
	ident    deviceIdent
	ports    []portData
	errs     []error // skipped files, each counted in rdma_scrape_errors_total
}

// heldDevice is what the reader keeps of a device between collects, for as
// long as its directory is the same kernfs node (a device removed and
// re-added, or re-probed by a firmware update, gets a new one): what does
// not change while it exists (its PCI and HCA identity), and its directory
// held open with the port attributes read through it (sysfs.Dir), so a
// collect re-reads them without opening them again.
type heldDevice struct {
	ino uint64
	rdmasysfs.Identity
	ident deviceIdent
	dir   *sysfs.Dir
	seen  map[string]bool // scratch for port: the counter names read so far
}

// deviceIdent is the device identity node_exporter's infiniband collector
// exports, from the device directory's attributes (empty when the kernel
// or driver has no such file: rxe has no board_id).
type deviceIdent struct {
	boardID, fwVer, hcaType, nodeGUID string
}

func (r *sysfsReader) readIdent(name string) deviceIdent {
	dir := r.class.DeviceDir(name)
	attr := func(f string) string {
		v, _ := sysfs.ReadAttr(filepath.Join(dir, f))
		return v
	}
	return deviceIdent{boardID: attr("board_id"), fwVer: attr("fw_ver"), hcaType: attr("hca_type"), nodeGUID: attr("node_guid")}
}

type sysfsReader struct {
	class   rdmasysfs.Class
	exclude map[string]bool
	allow   *sdk.Devices    // the host's device filter (--device.include/exclude); nil: every device
	fds     *sysfs.FDBudget // the descriptors held open, within RLIMIT_NOFILE

	mu    sync.Mutex
	cache map[string]*heldDevice
}

func newSysfsReader(root string, exclude []string) *sysfsReader {
	r := &sysfsReader{class: rdmasysfs.Class{Sysfs: root}, exclude: map[string]bool{}, fds: sysfs.NewFDBudget(), cache: map[string]*heldDevice{}}
	for _, d := range exclude {
		r.exclude[d] = true
	}
	return r
}

// devices reads every non-excluded RDMA device. A missing class directory
// means no RDMA stack: no devices, no error.
func (r *sysfsReader) devices(ctx context.Context) ([]deviceData, error) {
	all, err := r.class.Devices()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, name := range all {
		if !r.exclude[name] && r.allow.Allow(name) {
			names = append(names, name)
		}
	}
	r.prune(names)

	out := make([]*deviceData, len(names))
	sem := make(chan struct{}, sysfsWorkers)
	var wg sync.WaitGroup
	for i, name := range names {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = r.device(ctx, name)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	devs := make([]deviceData, 0, len(out))
	for _, d := range out {
		if d != nil {
			devs = append(devs, *d)
		}
	}
	return devs, nil
}

// prune forgets the devices that are gone and closes what they held.
func (r *sysfsReader) prune(present []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, h := range r.cache {
		if !slices.Contains(present, name) {
			h.dir.Close()
			delete(r.cache, name)
		}
	}
}

// close lets go of every held device (a new configuration makes a new
// reader).
func (r *sysfsReader) close() { r.prune(nil) }
func (r *sysfsReader) device(ctx context.Context, name string) *deviceData {
	st, err := os.Stat(r.class.DeviceDir(name))
	if err != nil || !st.IsDir() {
		// Dangling class link or a device that went away since the listing.
		return nil
	}
	h, err := r.held(name, st)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // went away since the stat
	}
	if err != nil {
		// Listed but not readable (a sandbox granting class/infiniband and
		// not the devices/ tree it links to): a skipped device the operator
		// must hear about, never one that silently is not there.
		return &deviceData{name: name, errs: []error{err}}
	}
	d := &deviceData{name: name, pciAddr: h.PCIAddr, isVF: h.IsVF, pfDevice: h.PFDevice, ident: h.ident}
	var buf sysfs.Buffer // one per device goroutine, reused for every listing and file
	portsDir, err := refreshedSub(h.dir, "ports", &buf)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) { // no ports directory: no ports
			d.errs = append(d.errs, err)
		}
		return d
	}
	ports := portsDir.Numbered("")
	d.ports = make([]portData, 0, len(ports))
	for _, e := range ports {
		if ctx.Err() != nil {
			return d
		}
		d.ports = append(d.ports, r.port(d, portsDir, e, h.seen, &buf))
	}
	return d
}

// held returns the device's held state, made once per kernfs node: when
// the device directory's inode changes (the device was removed and
// re-added) everything held for the old one is closed and read again.
func (r *sysfsReader) held(name string, st os.FileInfo) (*heldDevice, error) {
	ino := inode(st)
	r.mu.Lock()
	h, ok := r.cache[name]
	r.mu.Unlock()
	if ok && h.ino == ino && ino != 0 {
		return h, nil
	}
	if ok {
		h.dir.Close()
	}
	dir, err := sysfs.OpenDir(r.class.DeviceDir(name), r.fds)
	if err != nil {
		r.mu.Lock()
		delete(r.cache, name)
		r.mu.Unlock()
		return nil, err
	}
	h = &heldDevice{ino: ino, Identity: r.class.Identify(name), ident: r.readIdent(name), dir: dir, seen: map[string]bool{}}
	r.mu.Lock()
	r.cache[name] = h
	r.mu.Unlock()
	return h, nil
}

// Every directory below a device's is re-listed only when its stat changed
// (sysfs.Dir.RefreshIfChanged): the kernel makes a device's ports, counter
// files and GID attributes with the device and removes them with it, and
// a device removed and added again is another directory inode, which held
// compares on every collect (a stat of the device directory) and answers
// by reading everything afresh. The class directory, whose names do come
// and go, is listed on every collect.

// refreshedSub brings dir's listing up to date, then returns its
// subdirectory name, up to date too.
func refreshedSub(dir *sysfs.Dir, name string, buf *sysfs.Buffer) (*sysfs.Dir, error) {
	if err := dir.RefreshIfChanged(buf); err != nil {
		return nil, err
	}
	sub, err := dir.Sub(name)
	if err != nil {
		return nil, err
	}
	if err := sub.RefreshIfChanged(buf); err != nil {
		return nil, err
	}
	return sub, nil
}

// port reads one port through its held directory (the refreshed portsDir
// lists it as e).
// seen is the device's scratch set of the counter names read so far
// (cleared here), reused for every port of every collect.
func (r *sysfsReader) port(d *deviceData, portsDir *sysfs.Dir, e sysfs.Entry, seen map[string]bool, buf *sysfs.Buffer) portData {
	p := portData{num: e.Num}
	dir, err := portsDir.Sub(e.Name)
	if err == nil {
		err = dir.RefreshIfChanged(buf)
	}
	if err != nil {
		d.errs = append(d.errs, err)
		return p
	}
	attr := func(name string) string {
		v, _ := dir.ReadAttr(name, buf) // unreadable: an empty label, as rdma_exporter exports it
		return v
	}
	p.linkLayer = attr("link_layer")
	p.state = normalizeState(attr("state"), portStateNames)
	p.physState = normalizeState(attr("phys_state"), physStateNames)
	var width string
	p.linkRate, width = parseRate(attr("rate"))
	if w := attr("link_width"); w != "" {
		width = w
	}
	p.linkWidth = width
	if ndevs, err := heldNdevs(dir, buf); err == nil {
		p.netdev = rdmasysfs.NetDevIn(ndevs, buf)
	} // unreadable or absent (InfiniBand ports): no netdev
	// counters_ext/ first: where it exists (kernels before 4.5, mlx4) it
	// holds the 64-bit PMA counters while counters/ saturates at 32 bits
	// (a port_rcv_data stuck at 4294967295), so its values win.
	clear(seen)
	r.readCounters(d, &p, dir, "counters_ext", countersExt, seen, buf)
	r.readCounters(d, &p, dir, "counters", countersStd, seen, buf)
	r.readCounters(d, &p, dir, "hw_counters", countersHW, seen, buf)
	return p
}

// heldNdevs is the port's gid_attrs/ndevs directory, up to date.
func heldNdevs(port *sysfs.Dir, buf *sysfs.Buffer) (*sysfs.Dir, error) {
	gid, err := port.Sub("gid_attrs")
	if err != nil {
		return nil, err
	}
	return refreshedSub(gid, "ndevs", buf)
}

// counterDir is one of a port's counter directories.
type counterDir int

const (
	countersExt counterDir = iota // counters_ext/: 64-bit PMA counters of old kernels
	countersStd                   // counters/
	countersHW                    // hw_counters/: driver counters, lifespan
)

// extNames maps the counters_ext/ files whose name differs from their
// counters/ twin (the _64 suffix) to the counters/ name, so the 64-bit
// value is exported under the family rdma_exporter and newer kernels use.
// The unicast/multicast packet counters have the same name in both.
var extNames = map[string]string{
	"port_xmit_data_64":    "port_xmit_data",
	"port_rcv_data_64":     "port_rcv_data",
	"port_xmit_packets_64": "port_xmit_packets",
	"port_rcv_packets_64":  "port_rcv_packets",
}

// readCounters reads the counter directory sub of the refreshed port
// directory port.
func (r *sysfsReader) readCounters(d *deviceData, p *portData, port *sysfs.Dir, sub string, kind counterDir, seen map[string]bool, buf *sysfs.Buffer) {
	hw := kind == countersHW
	if !port.Has(sub) {
		return // counters_ext/ exists only on old kernels, hw_counters/ only with a driver that has them
	}
	dir, err := port.Sub(sub)
	if err == nil {
		err = dir.RefreshIfChanged(buf)
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.errs = append(d.errs, err)
		}
		return
	}
	if hw {
		p.hwNames = dir.Names()
	}
	p.counters = slices.Grow(p.counters, len(dir.Names()))
	for _, name := range dir.Names() {
		v, err := dir.ReadCounter(name, buf)
		if errors.Is(err, sysfs.ErrNotAvailable) {
			continue // the device has no PMA: the counter does not exist
		}
		if err != nil {
			d.errs = append(d.errs, err)
			continue
		}
		if hw && name == "lifespan" {
			p.lifespan, p.hasLifespan = v, true
			continue
		}
		if kind == countersExt {
			if n, ok := extNames[name]; ok {
				name = n
			}
		}
		if seen[name] {
			continue // one series per name: counters_ext/, then counters/, then hw_counters/ win
		}
		seen[name] = true
		p.counters = append(p.counters, counterSample{name: name, value: v})
	}
}

var portStateNames = map[int]string{0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}

var physStateNames = map[int]string{1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION_TRAINING",
	5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY_TEST"}

// normalizeState turns "4: ACTIVE" / "5: LinkUp" into the ib_verbs enum
// name rdma_exporter exports (ACTIVE, LINK_UP). Unknown numbers keep the
// kernel's text after the colon.
func normalizeState(raw string, names map[int]string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	num, rest, found := strings.Cut(raw, ":")
	if n, err := strconv.Atoi(strings.TrimSpace(num)); err == nil {
		if name, ok := names[n]; ok {
			return name
		}
	}
	if found {
		return strings.TrimSpace(rest)
	}
	return raw
}

// parseRate splits sysfs "rate" ("200 Gb/sec (4X HDR)") into the speed
// ("200 Gb/sec") and the width ("4X").
func parseRate(raw string) (speed, width string) {
	raw = strings.TrimSpace(raw)
	speed = raw
	if i := strings.Index(raw, "("); i >= 0 {
		speed = strings.TrimSpace(raw[:i])
		inner := strings.TrimSuffix(raw[i+1:], ")")
		if f := strings.Fields(inner); len(f) > 0 && strings.HasSuffix(f[0], "X") {
			width = f[0]
		}
	}
	return speed, width
}
