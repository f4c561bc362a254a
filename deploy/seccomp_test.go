package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// syscallNumbers maps this architecture's system call names to numbers,
// read from golang.org/x/sys's generated table (zsysnum_linux_<arch>.go in
// the module cache: the same numbers the kernel uses).
func syscallNumbers(t *testing.T) map[string]uint32 {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("find golang.org/x/sys: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "unix", "zsysnum_linux_"+runtime.GOARCH+".go")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nums := map[string]uint32{}
	for _, m := range regexp.MustCompile(`(?m)^\s*SYS_([A-Z0-9_]+)\s*=\s*(\d+)`).FindAllSubmatch(data, -1) {
		n, _ := strconv.ParseUint(string(m[2]), 10, 32)
		nums[strings.ToLower(string(m[1]))] = uint32(n)
	}
	if nums["landlock_create_ruleset"] == 0 || nums["socket"] == 0 {
		t.Fatalf("%s: no system call table", path)
	}
	return nums
}

// syscallGroups reads systemd's named sets (@default, @system-service, …)
// as systemd-analyze prints them: members are names or other sets.
func syscallGroups(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("systemd-analyze", "syscall-filter").Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v", err)
	}
	groups, current := map[string][]string{}, ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || trimmed[0] == '#':
		case line[0] == '@':
			current = trimmed
		case current != "":
			groups[current] = append(groups[current], trimmed)
		}
	}
	return groups
}

// unitSeccomp is the helper's --seccomp spec for the unit's
// SystemCallFilter= (an allow list, plus @default, which systemd always
// permits), SystemCallErrorNumber= and RestrictAddressFamilies=; "" when
// the unit sets no filter.
func unitSeccomp(t *testing.T, u unit) string {
	t.Helper()
	filter := u.words("SystemCallFilter")
	if len(filter) == 0 {
		return ""
	}
	if strings.HasPrefix(filter[0], "~") {
		t.Fatal("SystemCallFilter= is a deny list; this emulation applies allow lists")
	}
	groups, nums := syscallGroups(t), syscallNumbers(t)
	allowed := map[uint32]bool{}
	seen := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if strings.HasPrefix(name, "@") {
			members, ok := groups[name]
			if !ok {
				t.Fatalf("SystemCallFilter: %s is not a set systemd-analyze knows", name)
			}
			for _, m := range members {
				add(m)
			}
			return
		}
		if n, ok := nums[name]; ok { // others are other architectures' (…32, …_time64)
			allowed[n] = true
		}
	}
	add("@default")
	for _, name := range filter {
		add(name)
	}
	var list []uint32
	for n := range allowed {
		list = append(list, n)
	}
	slices.Sort(list)

	familyNumbers := map[string]uint32{"AF_UNIX": unix.AF_UNIX, "AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6, "AF_NETLINK": unix.AF_NETLINK, "AF_PACKET": unix.AF_PACKET}
	var families []uint32
	for _, f := range u.words("RestrictAddressFamilies") {
		n, ok := familyNumbers[f]
		if !ok {
			t.Fatalf("RestrictAddressFamilies: %s is not one this emulation knows", f)
		}
		families = append(families, n)
	}
	if len(families) == 0 {
		t.Fatal("the emulation needs RestrictAddressFamilies= (the unit has it)")
	}
	errno := uint32(unix.EPERM)
	if e := u.get("SystemCallErrorNumber"); e != "" && e != "EPERM" {
		t.Fatalf("SystemCallErrorNumber=%s: this emulation returns EPERM", e)
	}
	if a := u.get("SystemCallArchitectures"); a != "native" {
		t.Fatalf("SystemCallArchitectures=%q: this emulation allows the native architecture only", a)
	}
	return seccompSpec(list, families, errno, deniedNamespaces(t, u.get("RestrictNamespaces")))
}

// namespaceFlags are RestrictNamespaces='s names. (CLONE_NEWTIME is left
// out: in clone(2)'s flags its bit is part of the exit signal.)
var namespaceFlags = map[string]uint32{
	"cgroup": unix.CLONE_NEWCGROUP, "ipc": unix.CLONE_NEWIPC, "net": unix.CLONE_NEWNET,
	"mnt": unix.CLONE_NEWNS, "pid": unix.CLONE_NEWPID, "user": unix.CLONE_NEWUSER, "uts": unix.CLONE_NEWUTS,
}

// deniedNamespaces turns a RestrictNamespaces= value (yes, no, an allow
// list, or ~ and a deny list) into the CLONE_NEW* flags it denies.
func deniedNamespaces(t *testing.T, v string) uint32 {
	t.Helper()
	var all uint32
	for _, f := range namespaceFlags {
		all |= f
	}
	switch v {
	case "", "no", "false":
		return 0
	case "yes", "true":
		return all
	}
	deny := strings.HasPrefix(v, "~")
	var listed uint32
	for _, name := range strings.Fields(strings.TrimPrefix(v, "~")) {
		f, ok := namespaceFlags[name]
		if !ok {
			t.Fatalf("RestrictNamespaces=%s: %q is not a namespace type", v, name)
		}
		listed |= f
	}
	if deny {
		return listed
	}
	return all &^ listed
}
