package supervise

// These tests run the chaos test plugin as a real process over real gRPC,
// so the race detector sees the supervision loop, Collect and Stop as they
// run in the host.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/manifest"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
)

var chaosBin, handshakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "supervise-test")
	if err != nil {
		panic(err)
	}
	chaosBin, handshakeBin = filepath.Join(dir, "chaos"), filepath.Join(dir, "handshake")
	for bin, pkg := range map[string]string{chaosBin: "chaos", handshakeBin: "handshake"} {
		cmd := exec.Command("go", "build", "-o", bin, "../../../internal/testkit/testplugins/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			panic("build the " + pkg + " test plugin: " + err.Error())
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer is a log sink safe for the supervisor's goroutines.
type logBuffer struct{ syncbuf.Buffer }

func (b *logBuffer) lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// chaos installs the chaos plugin as plexporter-<name> and returns a
// supervisor for it with the given config section, and its log.
func chaos(t *testing.T, name string, cfg map[string]any, edit func(*Settings)) (*Supervisor, *logBuffer) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "plexporter-"+name)
	if err := os.Symlink(chaosBin, path); err != nil {
		t.Fatal(err)
	}
	raw, err := structpb.NewStruct(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{
		Config: raw, Timeout: 2 * time.Second, StartTimeout: 10 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		ConfigLocation: config.Location{File: "/etc/plexporter.yml", Key: "plugins." + name + ".config", Line: 7},
	}
	if edit != nil {
		edit(&s)
	}
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sup := New(discover.Plugin{Name: name, Path: path, Target: chaosBin, Identity: "test"}, s, log)
	t.Cleanup(sup.Stop)
	return sup, logs
}

// waitFor polls ok until it holds, failing the test after 60 s: a
// deadline only matters when the test fails, and on a machine loaded by
// other tests work that takes well under a second when quiet can take many
// times longer.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "pid file", func() bool {
		b, err := os.ReadFile(path)
		_, serr := fmt.Sscan(string(b), &pid)
		return err == nil && serr == nil
	})
	return pid
}

func TestStateTransitions(t *testing.T) {
	all := []State{Starting, Running, Backoff, Misconfigured, Refused, Stopped}
	want := map[[2]State]bool{
		{Starting, Running}: true, {Starting, Backoff}: true, {Starting, Misconfigured}: true, {Starting, Refused}: true,
		{Running, Backoff}:  true,
		{Backoff, Starting}: true,
	}
	for _, from := range all {
		for _, to := range all {
			ok := want[[2]State{from, to}] || (to == Stopped && from != Stopped)
			if got := from.CanBecome(to); got != ok {
				t.Errorf("%s → %s allowed = %v, want %v", from, to, got, ok)
			}
		}
	}
	if Misconfigured.String() != "misconfigured" || State(42).String() != "State(42)" {
		t.Error("state names")
	}
}

// Start, collect concurrently, crash and come back, stop: the states on the
// way, and a stop that logs no error.
func TestLifecycle(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	sup, logs := chaos(t, "life", map[string]any{"series": 2.0, "pid_file": pidFile}, nil)
	if st := sup.Status(); st.State != Starting || st.Up() {
		t.Fatalf("before Start: %v", st.State)
	}
	sup.Start()
	<-sup.FirstAttempt()
	st := sup.Status()
	if st.State != Running || !st.Up() || !st.Started || st.Info.GetVersion() != "0.0.1-test" || len(st.SHA256) != 64 {
		t.Fatalf("after the first start: %+v", st)
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if c := sup.Collect(context.Background()); c.Err != nil || len(c.Batches) == 0 {
				t.Errorf("collect: %v (%d batches)", c.Err, len(c.Batches))
			}
			_ = sup.Status()
		})
	}
	wg.Wait()

	syscall.Kill(readPID(t, pidFile), syscall.SIGKILL)
	waitFor(t, "restart after the crash", func() bool { st := sup.Status(); return st.Restarts == 1 && st.State == Running })
	if crash := logs.lines("level=ERROR", "plugin down; restarting", "plugin=life"); len(crash) != 1 {
		t.Errorf("a crash must be logged as an error once, got:\n%s", logs)
	}
	errorsBefore := len(logs.lines("level=ERROR"))

	sup.Stop()
	if st := sup.Status(); st.State != Stopped || st.Up() {
		t.Fatalf("after Stop: %v", st.State)
	}
	if c := sup.Collect(context.Background()); c.Err == nil {
		t.Error("a stopped plugin must not collect")
	}
	if errs := logs.lines("level=ERROR"); len(errs) != errorsBefore {
		t.Errorf("a stop the host asked for logged errors:\n%s", strings.Join(errs[errorsBefore:], "\n"))
	}
	if len(logs.lines("level=INFO", `msg="plugin process exited"`, "plugin=life")) == 0 {
		t.Errorf("the stop's exit is logged at INFO:\n%s", logs)
	}
}

// A plugin that rejects its settings is stopped, says so once with the
// config location, and is not restarted however long it waits.
func TestRejectedSettingsAreMisconfiguredNotRetried(t *testing.T) {
	sup, logs := chaos(t, "typo", map[string]any{"seris": 3.0}, nil)
	sup.Start()
	<-sup.FirstAttempt()
	st := sup.Status()
	if st.State != Misconfigured || st.Up() || !strings.HasPrefix(st.LastError, "seris: unknown key") {
		t.Fatalf("state %v, last error %q", st.State, st.LastError)
	}
	if st.Info.GetVersion() != "0.0.1-test" {
		t.Error("Info answered before Configure: keep it, `plexporter plugins` shows the version")
	}
	time.Sleep(300 * time.Millisecond) // more than ten backoffs
	if st := sup.Status(); st.Restarts != 0 || st.State != Misconfigured {
		t.Fatalf("a misconfigured plugin was restarted: %+v", st)
	}
	said := logs.lines(`seris: unknown key`)
	if len(said) != 1 || !strings.Contains(said[0], "level=ERROR") || !strings.Contains(said[0], "file=/etc/plexporter.yml key=plugins.typo.config line=7") || strings.Contains(said[0], "rpc error") {
		t.Fatalf("want one error line with the plugin's message and the config location, got:\n%s", logs)
	}
	sup.Stop()
	if sup.Status().State != Stopped {
		t.Fatal("a misconfigured plugin stops")
	}
}

// The pin is checked at every start; a mismatch is a refusal, not a crash.
func TestPinMismatchIsRefused(t *testing.T) {
	sup, logs := chaos(t, "pinned", map[string]any{}, func(s *Settings) { s.SHA256 = strings.Repeat("ab", 32) })
	sup.Start()
	<-sup.FirstAttempt()
	time.Sleep(200 * time.Millisecond)
	st := sup.Status()
	if st.State != Refused || st.Restarts != 0 || !strings.Contains(st.LastError, "the manifest pins") {
		t.Fatalf("%+v", st)
	}
	if len(logs.lines("level=ERROR", "plugin refused")) != 1 {
		t.Errorf("refusal not logged once:\n%s", logs)
	}
}

// Configure's warnings are logged at every start; sandbox hints the manifest
// does not grant once per supervisor.
func TestWarningsAndHintDrift(t *testing.T) {
	t.Setenv("CHAOS_SANDBOX_HINTS", `{"Capabilities": ["CAP_BPF"], "Devices": ["/dev/nvme0"]}`)
	pidFile := filepath.Join(t.TempDir(), "pid")
	sup, logs := chaos(t, "warn", map[string]any{"pid_file": pidFile, "warnings": []any{"device mlx5_9 not found"}}, func(s *Settings) {
		s.PassEnv = []string{"CHAOS_SANDBOX_HINTS"}
		s.Manifest = &manifest.Manifest{Paths: manifest.Paths{Devices: []string{"/dev/nvme*"}}}
	})
	sup.Start()
	<-sup.FirstAttempt()
	syscall.Kill(readPID(t, pidFile), syscall.SIGKILL)
	waitFor(t, "restart", func() bool { return sup.Status().Restarts == 1 && sup.Status().Up() })
	if n := len(logs.lines("level=WARN", `warning="device mlx5_9 not found"`, "key=plugins.warn.config")); n != 2 {
		t.Errorf("warning logged %d times over two starts, want 2:\n%s", n, logs)
	}
	drift := logs.lines("level=WARN", "sandbox hints")
	if len(drift) != 1 || !strings.Contains(drift[0], `ungranted="capability CAP_BPF"`) {
		t.Errorf("want one drift warning about CAP_BPF only (the device glob grants /dev/nvme0):\n%s", strings.Join(drift, "\n"))
	}
}

// Stop while the plugin is starting, and while collects are in flight.
func TestStopRacesStartAndCollect(t *testing.T) {
	for range 3 {
		sup, _ := chaos(t, "racer", map[string]any{"series": 100.0, "sleep": "50ms"}, nil)
		sup.Start()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					sup.Collect(context.Background())
					_ = sup.Status()
				}
			})
		}
		time.Sleep(30 * time.Millisecond)
		sup.Stop()
		wg.Wait()
		if sup.Status().State != Stopped {
			t.Fatalf("state %v after Stop", sup.Status().State)
		}
	}
}

// A plugin whose handshake names an address the host does not dial, or
// that speaks another protocol generation, is refused, not restarted: the
// same binary would fail the same way again (docs/plugin-protocol.md, open
// point 2).
func TestHandshakeFailuresAreRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		says []string // in the refusal
	}{
		"hostile": {
			env:  map[string]string{"HANDSHAKE_NETWORK": "tcp", "HANDSHAKE_ADDRESS": "127.0.0.1:1"},
			says: []string{`refusing to dial tcp address "127.0.0.1:1"`},
		},
		"elder": {
			env: map[string]string{"HANDSHAKE_NETWORK": "unix", "HANDSHAKE_ADDRESS": "${PLUGIN_UNIX_SOCKET_DIR}/plugin.sock",
				"HANDSHAKE_LISTEN": "1", "HANDSHAKE_APP": "2"},
			says: []string{"speaks another protocol", "Plugin version: 2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var pass []string
			for k, v := range tc.env {
				t.Setenv(k, v)
				pass = append(pass, k)
			}
			logs := &logBuffer{}
			path := filepath.Join(t.TempDir(), "plexporter-"+name)
			os.Symlink(handshakeBin, path)
			sup := New(discover.Plugin{Name: name, Path: path, Target: handshakeBin, Identity: "test"},
				Settings{PassEnv: pass, MinBackoff: 20 * time.Millisecond},
				slog.New(slog.NewTextHandler(logs, nil)))
			t.Cleanup(sup.Stop)
			sup.Start()
			<-sup.FirstAttempt()
			time.Sleep(200 * time.Millisecond) // ten backoffs
			st := sup.Status()
			if st.State != Refused || st.Restarts != 0 {
				t.Fatalf("%+v", st)
			}
			for _, w := range tc.says {
				if !strings.Contains(st.LastError, w) {
					t.Errorf("the refusal does not say %q: %s", w, st.LastError)
				}
			}
			if len(logs.lines("level=ERROR", "plugin refused", "plugin="+name)) != 1 {
				t.Errorf("the refusal is not logged once:\n%s", logs)
			}
		})
	}
}

// Info and Configure answers are bounded like Collect messages
// (MaxStartAnswerBytes), not by go-plugin's 2 GiB: an oversized one fails
// the start with the host's own words.
func TestOversizedStartAnswersFailTheStart(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg map[string]any
		env string
	}{
		"Info":      {cfg: map[string]any{"series": 1}, env: "30000"},             // ~1.5 MiB of descriptors
		"Configure": {cfg: map[string]any{"series": 1, "warning_bytes": 2 << 20}}, // one 2 MiB warning
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CHAOS_CATALOGUE", tc.env)
			sup, _ := chaos(t, "big", tc.cfg, func(s *Settings) { s.PassEnv = []string{"CHAOS_CATALOGUE"} })
			sup.Start()
			<-sup.FirstAttempt()
			st := sup.Status()
			if st.State == Running || !strings.Contains(st.LastError, name+": the plugin's answer is larger than the 1 MiB the host accepts") {
				t.Fatalf("want a failed start naming %s and the 1 MiB bound, got %v: %s", name, st.State, st.LastError)
			}
		})
	}
}
