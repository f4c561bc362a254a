package sandbox

import (
	"errors"
	"fmt"
	"runtime"
)

// CheckHost says whether this binary, on this host, can sandbox plugins at
// all: if it cannot, the host refuses to start sandboxed rather than have
// every plugin fail at each start with a bare "operation not permitted".
//
// Built with cgo it cannot: libcap's psx, which changes the credentials of
// every thread, is then its C implementation, which finds the threads in
// /proc/<getpid()>/task. In a plugin's PID namespace getpid() is not the
// pid that /proc (the host's, not remounted) knows, and the launcher hangs
// or signals another process's threads. On an architecture the network
// filter was not written for (seccomp_*.go), every plugin would run without
// it. And the host must be allowed to create the namespaces
// (namespaces.go).
func CheckHost() error {
	if builtWithCgo {
		return errors.New("this plexporter binary was built with cgo, and the plugin sandbox, which runs each plugin in its own PID namespace, needs a CGO_ENABLED=0 build (libcap's C psx cannot change credentials there): rebuild with CGO_ENABLED=0, as make build does")
	}
	if nativeAudit == 0 {
		return fmt.Errorf("the plugin sandbox's network filter (seccomp) is not implemented for %s, only for amd64 and arm64", runtime.GOARCH)
	}
	if err := canCreateNamespaces(); err != nil {
		return fmt.Errorf("the plugin sandbox runs each plugin in its own PID, IPC and (without a network grant) network namespace, and this host may not create them (unshare(CLONE_NEWPID|CLONE_NEWIPC|CLONE_NEWNET): %w): it needs CAP_SYS_ADMIN, under systemd RestrictNamespaces= must allow pid ipc net, and a container CAP_SYS_ADMIN", err)
	}
	return nil
}
