package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ebpfMaxExtraAnon bounds how much more anonymous memory (Go heap and
// runtime) the ebpf plugin holds than the median other plugin, all of them
// scraped by the same checks. Loading its programs decodes the kernel's
// BTF, a few MiB of heap that the plugin returns to the OS when the loads
// end. On the development machine (6.18, every group loaded, idle) it held
// 9-13 MiB against the nfs plugin's 3 before that, 5 after.
const ebpfMaxExtraAnon = 4 << 20

// checkEBPFMemory compares the anonymous memory (/proc/<pid>/status
// RssAnon) of the main host's ebpf plugin with the other plugins': at most
// ebpfMaxExtraAnon more than their median, i.e. the memory of decoding
// this kernel's BTF (and sunrpc's) was returned after the programs loaded.
func checkEBPFMemory(l *lab) error {
	pids, err := pluginPIDs()
	if err != nil {
		return err
	}
	if _, ok := pids["ebpf"]; !ok {
		return errors.New("no plexporter-ebpf process running from " + pluginDir)
	}
	var others []uint64
	var ebpf map[string]uint64
	var notes []string
	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		status, err := statusSizes(pids[name])
		if err != nil {
			return err
		}
		notes = append(notes, fmt.Sprintf("%s %.1f/%.1f/%.1f", name, mib(status["RssAnon"]), mib(status["VmRSS"]), mib(status["VmHWM"])))
		if name == "ebpf" {
			ebpf = status
		} else {
			others = append(others, status["RssAnon"])
		}
	}
	l.note("RssAnon/VmRSS/VmHWM MiB: %s", strings.Join(notes, ", "))
	if len(others) == 0 {
		return errSkip("no other plugin to compare with")
	}
	slices.Sort(others)
	median := others[len(others)/2]
	if anon := ebpf["RssAnon"]; anon > median+ebpfMaxExtraAnon {
		return fmt.Errorf("plexporter-ebpf (pid %d) holds %.1f MiB of anonymous memory, the median other plugin %.1f MiB: more than %.1f MiB above it, the heap used to load its programs (decoding the kernel's BTF) was not returned", pids["ebpf"], mib(anon), mib(median), mib(ebpfMaxExtraAnon))
	}
	return nil
}

// statusSizes is /proc/<pid>/status's size fields ("VmRSS: 1234 kB") in
// bytes.
func statusSizes(pid int) (map[string]uint64, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		out[key] = n << 10
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
