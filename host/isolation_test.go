package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSandboxSharesNoKernelState reproduces issue 28 item 4 with the probe
// in the sandbox of a manifest granting no network and no read-write path:
// it must not read a root key in the session keyring it was started with,
// nor plant one there, nor read a SysV segment the host's side created
// (mode 0666), nor be reached on an abstract unix socket it listens on,
// nor change the mode, owner, times or extended attributes of a directory
// of its own uid outside its grants (standing for another same-uid
// plugin's socket directory). With --no-plugin.sandbox each succeeds, so
// every assertion can fail.
func TestSandboxSharesNoKernelState(t *testing.T) {
	st := newSandboxTree(t)
	// The host inherits the session keyring of the thread it is started
	// from: this one, locked and never unlocked (it ends with the test), in
	// a keyring of the test's own.
	runtime.LockOSThread()
	if _, err := unix.KeyctlJoinSessionKeyring(fmt.Sprintf("plexporter-test-%d", os.Getpid())); err != nil {
		t.Fatalf("join a session keyring: %v", err)
	}
	desc := fmt.Sprintf("plexporter-test-secret-%d", os.Getpid())
	if _, err := unix.AddKey("user", desc, []byte("host secret"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
		t.Fatalf("add_key: %v", err)
	}
	shmKey := 0x504c0000 | os.Getpid()&0xffff
	shm, err := unix.SysvShmGet(shmKey, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o666)
	if err != nil {
		t.Fatalf("shmget: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(shm, unix.IPC_RMID, nil) })
	mem, err := unix.SysvShmAttach(shm, 0, 0)
	if err != nil {
		t.Fatalf("shmat: %v", err)
	}
	copy(mem, "host secret")
	unix.SysvShmDetach(mem)
	other := filepath.Join(st.root, "other-plugin-socket-dir")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil { // the probe's uid
		t.Fatal(err)
	}

	st.install(t, "probe", st.probeManifest(""))
	config := func(abstract string) string {
		return fmt.Sprintf("  probe: {config: {key_description: %q, shm_key: %d, abstract_listen: %q, metadata_path: %q}}\n", desc, shmKey, abstract, other)
	}
	actions := []string{"read_host_key", "plant_key", "read_host_shm", "chmod_outside", "chown_outside", "utime_outside", "setxattr_outside"}

	abstractOn := fmt.Sprintf("plexporter-test-probe-on-%d", os.Getpid())
	on := startSandboxHost(t, st, config(abstractOn))
	text, mfs := on.scrape("")
	if value(mfs, "plexporter_plugin_sandboxed", "plugin", "probe") != 1 || value(mfs, "plexporter_plugin_up", "plugin", "probe") != 1 {
		t.Fatalf("probe not up and sandboxed:\n%s", text)
	}
	if value(mfs, "probe_allowed", "action", "listen_abstract") != 1 {
		t.Fatalf("the probe could not listen on its abstract socket:\n%s", text)
	}
	for _, action := range actions {
		if v := value(mfs, "probe_allowed", "action", action); v != 0 {
			t.Errorf("sandboxed: %s = %v, want 0 (denied)\n%s", action, v, grepLines(text, `action="`+action+`"`))
		}
	}
	if err := dialAbstract(abstractOn); err == nil {
		t.Errorf("sandboxed: a process outside connected to the plugin's abstract socket @%s", abstractOn)
	}
	var fi os.FileInfo
	if fi, err = os.Stat(other); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory outside the grants changed: %v %v", fi.Mode(), err)
	}

	abstractOff := fmt.Sprintf("plexporter-test-probe-off-%d", os.Getpid())
	off := startSandboxHost(t, st, config(abstractOff), "--no-plugin.sandbox")
	text, free := off.scrape("")
	for _, action := range actions {
		v := value(free, "probe_allowed", "action", action)
		if action == "setxattr_outside" && v == 0 && strings.Contains(grepLines(text, action), "not supported") {
			continue // no user xattrs on this filesystem
		}
		if v != 1 {
			t.Errorf("without the sandbox: %s = %v, want 1 (or the test proves nothing)\n%s", action, v, grepLines(text, `action="`+action+`"`))
		}
	}
	if err := dialAbstract(abstractOff); err != nil {
		t.Errorf("without the sandbox the plugin's abstract socket must be reachable: %v", err)
	}
}

// dialAbstract connects to the abstract unix socket @name and reads the
// probe's greeting.
func dialAbstract(name string) error {
	c, err := net.DialTimeout("unix", "@"+name, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(c)
	if err == nil && !strings.HasPrefix(string(b), "probe abstract") {
		err = fmt.Errorf("read %q", b)
	}
	return err
}
