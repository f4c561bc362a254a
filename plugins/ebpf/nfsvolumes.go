package main

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
)

// The BPF side of the NFS latency programs sees an RPC's server address
// and NFS version, not the superblock it was issued for. nfsVolumes names
// the volume of a server and version from the mount table, the way the nfs
// plugin derives volume_id (volume_id_regex on the export path), and only
// when that is unambiguous: a server and version with exactly one volume
// mounted. Anything else is exported with volume_id="" and the server
// label, never with a guessed volume.

// nfsMount is one nfs or nfs4 line of a mounts file.
type nfsMount struct {
	server  netip.Addr // the addr= option
	version uint32     // NFS major version (RPC version), 0 when unknown
	export  string     // the device's path after "server:"
}

// serverVersion keys the volumes of a server and NFS version.
type serverVersion struct {
	server  netip.Addr
	version uint32
}

// nfsVolumes are the volume_ids mounted per server and NFS version.
type nfsVolumes map[serverVersion][]string

// volumeID returns the one volume mounted from server with version, or ""
// when there is none or more than one (or a mount of the server whose
// version is unknown, which could be either).
func (v nfsVolumes) volumeID(server netip.Addr, version uint32) string {
	ids := v[serverVersion{server, version}]
	if len(ids) != 1 || len(v[serverVersion{server, 0}]) > 0 {
		return ""
	}
	return ids[0]
}

func buildNFSVolumes(mounts []nfsMount, namer *nfsvolume.Namer) nfsVolumes {
	out := nfsVolumes{}
	for _, m := range mounts {
		k := serverVersion{m.server, m.version}
		id := namer.Name(m.export)
		if !slices.Contains(out[k], id) {
			out[k] = append(out[k], id)
		}
	}
	return out
}

// readNFSMounts returns the NFS mounts of a mounts file (<procfs>/self/mounts)
// that name their server's address.
func readNFSMounts(path string) ([]nfsMount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mounts, err := parseNFSMounts(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return mounts, nil
}

func parseNFSMounts(r io.Reader) ([]nfsMount, error) {
	var out []nfsMount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// device mountpoint fstype options dump pass
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[2] != "nfs" && f[2] != "nfs4") {
			continue
		}
		m := nfsMount{export: exportPath(unescapeMount(f[0]))}
		if f[2] == "nfs4" {
			m.version = 4
		}
		for _, opt := range strings.Split(f[3], ",") {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "addr":
				if a, err := netip.ParseAddr(v); err == nil {
					m.server = a.Unmap()
				}
			case "vers":
				major, _, _ := strings.Cut(v, ".")
				if n, err := strconv.ParseUint(major, 10, 32); err == nil {
					m.version = uint32(n)
				}
			}
		}
		if m.server.IsValid() {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// exportPath is the path of an NFS device "server:/export"
// ("[v6addr]:/export").
func exportPath(dev string) string {
	if strings.HasPrefix(dev, "[") {
		if i := strings.Index(dev, "]:"); i > 0 {
			return dev[i+2:]
		}
	}
	if i := strings.Index(dev, ":"); i >= 0 {
		return dev[i+1:]
	}
	return dev
}

// unescapeMount undoes the kernel's octal escapes in a mounts field
// (\040 for a space, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
