package main

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/procfs"
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

// statusSizes is the size fields of /proc/<pid>/status the check reads,
// in bytes, keyed by their names there.
func statusSizes(pid int) (map[string]uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return nil, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return map[string]uint64{"RssAnon": st.RssAnon, "VmRSS": st.VmRSS, "VmHWM": st.VmHWM}, nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
