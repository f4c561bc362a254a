package main

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// nfsServers reads the NFS servers' addresses from a mounts file
// (<procfs>/self/mounts): the addr= option the NFS client records for each
// mount of type nfs or nfs4. Sorted, without duplicates.
func nfsServers(path string) ([]netip.Addr, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	servers, err := parseNFSServers(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return servers, nil
}

func parseNFSServers(r io.Reader) ([]netip.Addr, error) {
	var out []netip.Addr
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// device mountpoint fstype options dump pass
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[2] != "nfs" && f[2] != "nfs4") {
			continue
		}
		for _, opt := range strings.Split(f[3], ",") {
			v, ok := strings.CutPrefix(opt, "addr=")
			if !ok {
				continue
			}
			if a, err := netip.ParseAddr(v); err == nil {
				out = append(out, a.Unmap())
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out), nil
}
