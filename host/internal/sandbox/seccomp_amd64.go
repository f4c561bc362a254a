package sandbox

import "golang.org/x/sys/unix"

// metadataLegacy are amd64's calls that change file metadata besides the
// generic ones (metadata.go).
var metadataLegacy = []uint32{unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT}
