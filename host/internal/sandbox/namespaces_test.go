package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/host/internal/manifest"
)

// Which plugins get a network namespace of their own: none whose grant
// names anything, nor one reading procfs net directories (nfs's
// {procfs}/self/net, ernic's whole {procfs}), whose contents depend on the
// reader's namespace.
func TestOwnNetNamespace(t *testing.T) {
	cases := []struct {
		name   string
		net    manifest.Network
		procfs string
		paths  []string
		want   bool
	}{
		{"no grant", manifest.Network{}, "/proc", []string{"/sys/class/infiniband", "/proc/self/status"}, true},
		{"netlink", manifest.Network{Netlink: []string{"rdma"}}, "/proc", nil, false},
		{"unix", manifest.Network{Unix: manifest.PathList{"/run/x.sock"}}, "/proc", nil, false},
		{"inet", manifest.Network{Inet: &manifest.Inet{}}, "/proc", nil, false},
		{"nfs: self/net", manifest.Network{}, "/proc", []string{"/proc/self/mountstats", "/proc/self/net"}, false},
		{"container root: 1/net", manifest.Network{}, "/host/proc", []string{"/host/proc/1/net/rpc/nfs"}, false},
		{"ernic: all of procfs", manifest.Network{}, "/host/proc", []string{"/host/proc"}, false},
		{"/proc/net", manifest.Network{}, "/host/proc", []string{"/proc/net/dev"}, false},
		{"a pid directory", manifest.Network{}, "/proc", []string{"/proc/self"}, false},
		{"ebpf: mountinfo", manifest.Network{}, "/host/proc", []string{"/proc/self/mountinfo", "/host/proc/self/mounts"}, true},
		{"not procfs", manifest.Network{}, "/proc", []string{"/procfoo/net", "/sys/class/net"}, true},
	}
	for _, c := range cases {
		if got := ownNetNamespace(c.net, c.procfs, c.paths); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	s := Spec{NetNamespace: true, PIDNamespace: true}
	if got := s.SysProcAttr().Cloneflags; got != unix.CLONE_NEWPID|unix.CLONE_NEWIPC|unix.CLONE_NEWNET {
		t.Errorf("clone flags %#x", got)
	}
	s = Spec{}
	if got := s.SysProcAttr().Cloneflags; got != unix.CLONE_NEWIPC {
		t.Errorf("clone flags of pid_namespace: host with a network grant %#x, want CLONE_NEWIPC only", got)
	}
}

// The keys-and-metadata filter in a BPF VM: keys always denied, metadata
// changes unless the plugin has a read-write grant, nothing else.
func TestStateFilter(t *testing.T) {
	allow, eperm := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	for _, metadata := range []bool{false, true} {
		raw, err := stateFilter(&Spec{Metadata: metadata})
		if err != nil {
			t.Fatal(err)
		}
		prog, _ := bpf.Disassemble(raw)
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		run := func(arch, nr uint32) uint32 {
			data := make([]byte, 64)
			binary.BigEndian.PutUint32(data[offNr:], nr)
			binary.BigEndian.PutUint32(data[offArch:], arch)
			out, err := vm.Run(data)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(out)
		}
		for _, nr := range keySyscalls {
			if got := run(nativeAudit, nr); got != eperm {
				t.Errorf("metadata %v: key call %d: %#x, want EPERM", metadata, nr, got)
			}
		}
		want := eperm
		if metadata {
			want = allow
		}
		for _, nr := range metadataSyscalls {
			if got := run(nativeAudit, nr); got != want {
				t.Errorf("metadata %v: call %d: %#x, want %#x", metadata, nr, got, want)
			}
		}
		for _, nr := range []uint32{unix.SYS_OPENAT, unix.SYS_READ, unix.SYS_FSTAT, unix.SYS_GETXATTR} {
			if got := run(nativeAudit, nr); got != allow {
				t.Errorf("metadata %v: call %d: %#x, want allow", metadata, nr, got)
			}
		}
	}
}
