package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"kernel.org/pub/linux/libs/security/libcap/cap"
)

// pluginDir is where the packages put plugins and their manifests.
const pluginDir = "/usr/lib/plexporter/plugins"

// checkPluginsUp waits until every installed plugin is up and sandboxed:
// the host starts them one by one, and the ebpf plugin parses the kernel's
// BTF before it answers, which takes long under TCG.
func checkPluginsUp(l *lab, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	start := time.Now()
	for {
		e, err := l.s.scrape()
		var missing []string
		if err != nil {
			missing = []string{err.Error()}
		} else {
			for _, p := range l.plugins {
				up, _ := e.value("plexporter_plugin_up", "plugin", p)
				sandboxed, _ := e.value("plexporter_plugin_sandboxed", "plugin", p)
				if up != 1 || sandboxed != 1 {
					missing = append(missing, fmt.Sprintf("%s (up %v, sandboxed %v)", p, up, sandboxed))
				}
			}
		}
		if len(missing) == 0 {
			l.note("all %d plugins up and sandboxed after %s", len(l.plugins), time.Since(start).Round(time.Second))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s not up and sandboxed: %s (host log: /mnt/host/out/plexporter.log)", timeout, strings.Join(missing, ", "))
		}
		time.Sleep(2 * time.Second)
	}
}

// checkPluginIdentity finds each plugin's process and checks what the
// sandbox made of it: the plexporter user and group the package creates,
// never root, and effective capabilities exactly the ones its installed
// manifest grants.
func checkPluginIdentity(l *lab) error {
	u, err := user.Lookup("plexporter")
	if err != nil {
		return fmt.Errorf("the plexporter user: %w (guest.sh creates it as the package's sysusers.d entry says)", err)
	}
	procs, err := pluginProcesses()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range l.plugins {
		st, ok := procs[p]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no process runs %s/plexporter-%s", p, pluginDir, p))
			continue
		}
		want, err := manifestCapabilities(filepath.Join(pluginDir, "plexporter-"+p+".yaml"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.uid != u.Uid || st.gid != u.Gid {
			errs = append(errs, fmt.Errorf("%s: runs as uid %s gid %s, want plexporter (%s:%s)", p, st.uid, st.gid, u.Uid, u.Gid))
		}
		if st.capEff != want {
			errs = append(errs, fmt.Errorf("%s: effective capabilities %#x, want %#x (its manifest)", p, st.capEff, want))
		}
		if !st.noNewPrivs {
			errs = append(errs, fmt.Errorf("%s: no_new_privs is not set", p))
		}
	}
	l.note("plexporter user uid %s; %d plugin processes checked", u.Uid, len(procs))
	return errors.Join(errs...)
}

type procStatus struct {
	uid, gid   string
	capEff     uint64
	noNewPrivs bool
}

// pluginProcesses maps plugin name to its process's status, found by the
// executable the process runs.
func pluginProcesses() (map[string]procStatus, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]procStatus{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != pluginDir {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var st procStatus
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			f := strings.Fields(v)
			switch {
			case k == "Uid" && len(f) > 1:
				st.uid = f[1] // effective
			case k == "Gid" && len(f) > 1:
				st.gid = f[1]
			case k == "CapEff" && len(f) > 0:
				st.capEff, _ = strconv.ParseUint(f[0], 16, 64)
			case k == "NoNewPrivs" && len(f) > 0:
				st.noNewPrivs = f[0] == "1"
			}
		}
		out[strings.TrimPrefix(filepath.Base(exe), "plexporter-")] = st
	}
	return out, nil
}

func manifestCapabilities(path string) (uint64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("installed manifest: %w", err)
	}
	var m struct {
		Capabilities []string `yaml:"capabilities"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var set uint64
	for _, c := range m.Capabilities {
		// The host resolves manifest names with libcap too (sandbox.Resolve).
		bit, err := cap.FromName(strings.ToLower(c))
		if err != nil {
			return 0, fmt.Errorf("%s: capability %s: %w", path, c, err)
		}
		set |= 1 << uint(bit)
	}
	return set, nil
}

// run runs a guest tool and returns its standard output; the error holds
// its standard error.
func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func readUint(path string) (uint64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// before and after scrape around fn: the counters checks compare.
func around(l *lab, fn func() error) (before, after exposition, err error) {
	if before, err = l.s.scrape(); err != nil {
		return nil, nil, err
	}
	if err = fn(); err != nil {
		return nil, nil, err
	}
	after, err = l.s.scrape()
	return before, after, err
}

// delta is after-before of one series that must exist in both scrapes.
func delta(before, after exposition, name string, want ...string) (float64, error) {
	b, err := before.value(name, want...)
	if err != nil {
		return 0, fmt.Errorf("before: %w", err)
	}
	return deltaFrom(b, after, name, want...)
}

// eventDelta is delta for a series born with its first event (the ebpf
// plugin's per-device and per-endpoint counters): absent before is 0.
func eventDelta(before, after exposition, name string, want ...string) (float64, error) {
	var b float64
	if len(before.series(name, want...)) > 0 {
		var err error
		if b, err = before.value(name, want...); err != nil {
			return 0, fmt.Errorf("before: %w", err)
		}
	}
	return deltaFrom(b, after, name, want...)
}

func deltaFrom(b float64, after exposition, name string, want ...string) (float64, error) {
	a, err := after.value(name, want...)
	if err != nil {
		return 0, fmt.Errorf("after: %w", err)
	}
	return a - b, nil
}

// dropDentries makes the kernel reclaim dentries and inodes, as memory
// pressure does, between two scrapes; reclaim/<plugin> read them.
func dropDentries(l *lab) error {
	var err error
	l.reclaimBefore, l.reclaimAfter, err = around(l, func() error {
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			return fmt.Errorf("drop dentries and inodes: %w", err)
		}
		// One scrape in between: an error logged once and counted from then on.
		_, err := l.s.scrape()
		return err
	})
	return err
}

// checkAfterReclaim: the plugin reported no new partial error in the two
// scrapes after the reclaim.
func checkAfterReclaim(l *lab, plugin string) error {
	if l.reclaimAfter == nil {
		return errors.New("reclaim/drop-dentries did not run")
	}
	var errs []error
	for _, m := range l.reclaimAfter.series("plexporter_plugin_collect_errors_total", "plugin", plugin) {
		collector := label(m, "collector")
		d, err := eventDelta(l.reclaimBefore, l.reclaimAfter, "plexporter_plugin_collect_errors_total", "plugin", plugin, "collector", collector)
		if err != nil {
			errs = append(errs, err)
		} else if d > 0 {
			errs = append(errs, fmt.Errorf("%s: %v new %s errors after the dentry reclaim (plexporter.log says which)", plugin, d, collector))
		}
	}
	if up, err := l.reclaimAfter.value("plexporter_plugin_up", "plugin", plugin); err != nil || up != 1 {
		errs = append(errs, fmt.Errorf("%s: plexporter_plugin_up = %v (%v) after the dentry reclaim", plugin, up, err))
	}
	return errors.Join(errs...)
}
