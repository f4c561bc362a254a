package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// rdmaTemplate is a device of the fixture tree that the scaled tree copies.
type rdmaTemplate struct {
	name   string // RDMA device name, e.g. mlx5_0
	pciDir string // sys-relative PCI device dir, e.g. devices/pci0000:16/0000:16:02.0/0000:17:00.0
}

// scaleRDMA turns the rdma plugin's fixture tree (unpacked at sys) into one
// with `devices` mlx5 devices of `ports` ports each: the physical-function
// mlx5 devices of the fixture are copied round-robin to new PCI addresses
// and renamed mlx5_<i>, port 1 is copied to the other ports, the class and
// bus links are created, every relative symlink inside a copy is rewritten
// to the copy's names, and the fixture's own class links are removed (their
// device directories stay; nothing points at them). It returns the devices'
// names and fails if any link of the new devices dangles.
func scaleRDMA(sys string, devices, ports int) ([]string, error) {
	class := filepath.Join(sys, "class", "infiniband")
	ents, err := os.ReadDir(class)
	if err != nil {
		return nil, err
	}
	var templates []rdmaTemplate
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(class, e.Name()))
		if err != nil {
			return nil, err
		}
		// ../../devices/<pci path>/infiniband/<name>
		rel := strings.TrimPrefix(target, "../../")
		pciDir, _, ok := strings.Cut(rel, "/infiniband/")
		if !ok || !strings.HasPrefix(e.Name(), "mlx5_") || !strings.HasPrefix(pciDir, "devices/pci") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(sys, pciDir, "physfn")); err == nil {
			continue // a VF: its physfn link would point at the template's PF
		}
		templates = append(templates, rdmaTemplate{name: e.Name(), pciDir: pciDir})
	}
	if len(templates) == 0 {
		return nil, errors.New("no mlx5 physical-function device in the fixture tree")
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(class, e.Name())); err != nil {
			return nil, err
		}
	}
	var names []string
	nextBus := 0x20
	for i := range devices {
		t := templates[i%len(templates)]
		name := fmt.Sprintf("mlx5_%d", i)
		oldAddr := filepath.Base(t.pciDir)
		// The next free bus number of the domain, device 00, function 0.
		var newAddr, newPCI string
		for ; nextBus < 0x100; nextBus++ {
			newAddr = fmt.Sprintf("%s:%02x:00.0", oldAddr[:4], nextBus)
			newPCI = filepath.Join(filepath.Dir(t.pciDir), newAddr)
			_, err1 := os.Lstat(filepath.Join(sys, "bus", "pci", "devices", newAddr))
			_, err2 := os.Lstat(filepath.Join(sys, newPCI))
			if os.IsNotExist(err1) && os.IsNotExist(err2) {
				break
			}
		}
		if nextBus >= 0x100 {
			return nil, errors.New("scaled rdma tree: no free PCI bus number")
		}
		nextBus++
		rename := strings.NewReplacer(oldAddr, newAddr, "/"+t.name, "/"+name)
		var links [][2]string // template link, copied link
		err := copyTree(filepath.Join(sys, t.pciDir), filepath.Join(sys, newPCI), func(rel string) (string, bool) {
			// Directory names: the RDMA device dir is renamed.
			if rel == filepath.Join("infiniband", t.name) || strings.HasPrefix(rel, filepath.Join("infiniband", t.name)+"/") {
				return filepath.Join("infiniband", name) + strings.TrimPrefix(rel, filepath.Join("infiniband", t.name)), true
			}
			if strings.HasPrefix(filepath.Base(rel), "virtfn") {
				return "", false // links to the template's VFs
			}
			return rel, true
		}, func(target string) string { return rename.Replace(target) }, &links)
		if err != nil {
			return nil, err
		}
		ibDir := filepath.Join(sys, newPCI, "infiniband", name)
		for p := 2; p <= ports; p++ {
			dst := filepath.Join(ibDir, "ports", fmt.Sprint(p))
			if _, err := os.Stat(dst); err == nil {
				continue
			}
			if err := copyTree(filepath.Join(ibDir, "ports", "1"), dst, func(rel string) (string, bool) { return rel, true }, func(t string) string { return t }, &links); err != nil {
				return nil, err
			}
		}
		if err := os.Symlink(filepath.Join("..", "..", newPCI, "infiniband", name), filepath.Join(class, name)); err != nil {
			return nil, err
		}
		bus := filepath.Join(sys, "bus", "pci", "devices", newAddr)
		if err := os.Symlink(filepath.Join("..", "..", "..", newPCI), bus); err != nil {
			return nil, err
		}
		names = append(names, name)
		// The class and bus links, and every link of the copy whose template
		// link resolves, must resolve (the fixture has dangling links of its
		// own, e.g. driver and net subsystem links: they stay as they are).
		var dangling []string
		check := func(path string) {
			if _, err := os.Stat(path); err != nil {
				dangling = append(dangling, path)
			}
		}
		check(filepath.Join(class, name))
		check(bus)
		for _, l := range links {
			if _, err := os.Stat(l[0]); err == nil {
				check(l[1])
			}
		}
		if len(dangling) > 0 {
			return nil, fmt.Errorf("scaled rdma tree: dangling links: %s", strings.Join(dangling, ", "))
		}
	}
	return names, nil
}

// copyTree copies src to dst. mapPath renames (or drops) entries by their
// src-relative path; mapLink rewrites symlink targets. Each copied link is
// appended to links as (source link, copy).
func copyTree(src, dst string, mapPath func(rel string) (string, bool), mapLink func(string) string, links *[][2]string) error {
	n := 0
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > 100000 {
			return errors.New("copyTree: too many entries")
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		newRel, keep := mapPath(rel)
		if !keep {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		out := filepath.Join(dst, newRel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			*links = append(*links, [2]string{path, out})
			return os.Symlink(mapLink(target), out)
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
}

// nfsServers is how many NFS servers the generated mounts spread over.
const nfsServers = 10

// buildProcfs writes a procfs tree under root for `mounts` NFSv4.2 mounts
// with nconnect lanes each: <root>/4242/{mountstats,mountinfo,net/tcp} and
// self -> 4242 (node_exporter resolves self with readlink). The per-op,
// event and byte lines are those of the nfs plugin's nconnect fixture; the
// mounts spread over nfsServers servers, whose nconnect connections appear
// in net/tcp as kernel sockets. It returns the number of NFS mounts written.
func buildProcfs(root, fixture string, mounts, nconnect int) error {
	b, err := os.ReadFile(fixture)
	if err != nil {
		return err
	}
	text := string(b)
	// Split the fixture into its non-NFS device lines and the NFS block.
	var header []string
	var block []string
	inNFS := false
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.HasPrefix(line, "device ") {
			inNFS = strings.Contains(line, "with fstype nfs")
			if !inNFS {
				header = append(header, line)
				continue
			}
			if len(block) > 0 {
				break // only the first NFS block is the template
			}
			block = append(block, line)
			continue
		}
		if inNFS {
			block = append(block, line)
		}
	}
	if len(block) == 0 {
		return fmt.Errorf("%s: no NFS block", fixture)
	}
	var xprtTemplate string
	for _, line := range block {
		if strings.HasPrefix(strings.TrimSpace(line), "xprt:") {
			xprtTemplate = line
			break
		}
	}
	if xprtTemplate == "" {
		return fmt.Errorf("%s: no xprt line", fixture)
	}

	var ms, mi strings.Builder
	mountID := 20
	// Non-NFS mounts: mountinfo needs the same entries in the same order.
	for _, line := range header {
		// device <dev> mounted on <mp> with fstype <fs>
		f := strings.Fields(line)
		if len(f) < 8 {
			return fmt.Errorf("%s: bad device line %q", fixture, line)
		}
		dev, mp, fstype := f[1], f[4], f[7]
		ms.WriteString(line + "\n")
		fmt.Fprintf(&mi, "%d 1 0:%d / %s rw,relatime shared:%d - %s %s rw\n", mountID, mountID, mp, mountID, fstype, dev)
		mountID++
	}
	srvIP := func(s int) string { return fmt.Sprintf("10.20.0.%d", 5+s) }
	for m := range mounts {
		s := m % nfsServers
		dev := fmt.Sprintf("%s:/vol/data%02d", srvIP(s), m)
		mp := fmt.Sprintf("/mnt/data%02d", m)
		for i, line := range block {
			switch {
			case i == 0:
				fmt.Fprintf(&ms, "device %s mounted on %s with fstype nfs4 statvers=1.1\n", dev, mp)
			case strings.HasPrefix(strings.TrimSpace(line), "opts:"):
				ms.WriteString(strings.Replace(line, "nconnect=4", fmt.Sprintf("nconnect=%d", nconnect), 1) + "\n")
			case strings.HasPrefix(strings.TrimSpace(line), "xprt:"):
				if line != xprtTemplate {
					continue // the template's other lanes
				}
				// xprt: tcp <srcport> <bind> <conn> <connect_time> <idle> <sends> <recvs> ...
				f := strings.Fields(strings.TrimSpace(line))
				for lane := range nconnect {
					g := append([]string(nil), f...)
					g[2] = "0" // NFSv4 prints source port 0
					g[7] = fmt.Sprint(17900000 + 1000*m + lane)
					g[8] = fmt.Sprint(17900000 + 1000*m + lane)
					fmt.Fprintf(&ms, "\txprt:\t%s\n", strings.Join(g[1:], " "))
				}
			default:
				ms.WriteString(line + "\n")
			}
		}
		ms.WriteString("\n")
		fmt.Fprintf(&mi, "%d 1 0:%d / %s rw,relatime shared:%d - nfs4 %s rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,nconnect=%d,timeo=600,retrans=2,sec=sys,clientaddr=10.20.0.41,local_lock=none,addr=%s\n",
			mountID, mountID, mp, mountID, dev, nconnect, srvIP(s))
		mountID++
	}

	// net/tcp: a listening socket, and nconnect kernel sockets per server.
	var tcp strings.Builder
	tcp.WriteString("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
	hexIP := func(a, b, c, d int) string { return fmt.Sprintf("%02X%02X%02X%02X", d, c, b, a) } // little-endian host
	row := 0
	fmt.Fprintf(&tcp, "%4d: %s:%04X %s:%04X 0A 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0\n",
		row, "00000000", 22, "00000000", 0, 30000)
	row++
	for s := range min(nfsServers, mounts) {
		for lane := range nconnect {
			fmt.Fprintf(&tcp, "%4d: %s:%04X %s:%04X 01 00000000:00000000 02:00001D4C 00000000     0        0 %d 3 0000000000000000 20 4 31 10 28\n",
				row, hexIP(10, 20, 0, 41), 700+s*nconnect+lane, hexIP(10, 20, 0, 5+s), 2049, 48000+row)
			row++
		}
	}

	pid := filepath.Join(root, "4242")
	if err := os.MkdirAll(filepath.Join(pid, "net"), 0o755); err != nil {
		return err
	}
	for name, body := range map[string]string{"mountstats": ms.String(), "mountinfo": mi.String(), "net/tcp": tcp.String()} {
		if err := os.WriteFile(filepath.Join(pid, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return os.Symlink("4242", filepath.Join(root, "self"))
}
