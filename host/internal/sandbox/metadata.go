package sandbox

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Two things the uid a plugin runs as could otherwise do that no Landlock
// rule covers (issue 28 item 4):
//
//   - Keys. A process inherits its parent's session keyring across setuid,
//     so every plugin held the host's: it could read a root-owned key whose
//     possessor may read it, and plant keys the host then holds. Keyrings
//     of the uid (@u, @us) are shared by every plugin of that uid too. So
//     the launcher joins a new anonymous session keyring while still root
//     (the host's is out of reach even of requests the kernel makes on the
//     plugin's behalf), and the filter below denies add_key, request_key and
//     keyctl outright: no collector has any business with keys, and denying
//     the calls also closes the uid's keyrings, which a session keyring of
//     its own would not.
//   - File metadata. Landlock has no access right for chmod, chown, utime
//     or extended attributes in any ABI this code handles (up to 9; this
//     machine's kernel has 7): a plugin could change them on every
//     file its uid owns or may write outside its grants, e.g. open another
//     same-uid plugin's socket directory to the world. Unless the manifest
//     grants a read-write path (a plugin that writes may need to set modes
//     on what it writes), the filter denies those calls with EPERM.
//
//	add_key, request_key, keyctl                   -> EPERM
//	chmod, fchmod, fchmodat, fchmodat2, chown,
//	fchown, lchown, fchownat, utime, utimes,
//	futimesat, utimensat, setxattr, lsetxattr,
//	fsetxattr, setxattrat, removexattr,
//	lremovexattr, fremovexattr, removexattrat      -> EPERM unless Spec.Metadata
//	everything else, and calls of a foreign arch   -> allow (the network filter
//	                                                  answers those with ENOSYS)

// keySyscalls are the key management calls.
var keySyscalls = []uint32{unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL}

// metadataSyscalls are the calls that change a file's mode, owner, times or
// extended attributes: the generic ones every architecture has, and the
// legacy ones of this one (metadataLegacy, seccomp_*.go).
var metadataSyscalls = append([]uint32{
	unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
	unix.SYS_FCHOWN, unix.SYS_FCHOWNAT,
	unix.SYS_UTIMENSAT,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
}, metadataLegacy...)

// stateFilter is the seccomp program for s: keys always denied, file
// metadata unless s.Metadata.
func stateFilter(s *Spec) ([]bpf.RawInstruction, error) {
	deny := keySyscalls
	if !s.Metadata {
		deny = append(append([]uint32{}, keySyscalls...), metadataSyscalls...)
	}
	a := newAsm()
	a.Load(offArch)
	a.Jeq(nativeAudit, "", "allow")
	a.Load(offNr)
	for _, nr := range deny {
		a.Jeq(nr, "deny", "")
	}
	a.Jmp("allow")
	a.Label("allow")
	a.Ret(unix.SECCOMP_RET_ALLOW)
	a.Label("deny")
	a.Ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	return a.Assemble()
}

// joinOwnKeyring gives the calling thread (the one that execs) a new
// anonymous session keyring in place of the host's. Called while still
// root: the keyring counts against root's key quota, not the plugin
// user's small one, which restarts would otherwise drain.
func joinOwnKeyring() error {
	// A NULL name: a new anonymous keyring. A named one would be shared
	// with every process that joins the same name.
	if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
		return fmt.Errorf("join a session keyring of its own: %w", e)
	}
	return nil
}

// installStateFilter stacks stateFilter for s on the calling thread.
func installStateFilter(s *Spec) error {
	raw, err := stateFilter(s)
	if err != nil {
		return err
	}
	return loadFilter("keys and file metadata", raw, 0)
}
