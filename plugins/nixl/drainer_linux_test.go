package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestConcurrentWriter: a goroutine writes transfers in NIXL's layout
// while the plugin drains on its timer and scrapes run too. The writer
// waits whenever the ring is full, so every event fits eventually: the
// totals must then be exact (none counted twice, none lost). Values are
// distinct, so a duplicate and a loss cannot cancel out.
func TestConcurrentWriter(t *testing.T) {
	dir := t.TempDir()
	const capacity = 1024 // small: the writer laps the ring 150 times
	w := newRingWriter(t, filepath.Join(dir, "rank-0"), layoutV4, capacity)
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"telemetry_dirs": []any{dir}, "drain_interval": "10ms", "hostname": "h",
	}})
	sdktest.Collect(t, c, 0) // the ring is found

	const transfers = 40000
	var wantTx, wantXfer uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i <= transfers; i++ {
			for _, e := range transfer(i%700, i, i*3, true) {
				for !w.write(e) {
					runtime.Gosched() // full: wait for the drainer, as NIXL would not (it drops)
				}
			}
		}
	}()
	for i := uint64(1); i <= transfers; i++ {
		wantTx += i * 3
		wantXfer += i
	}
	var scrapes sync.WaitGroup
	scrapes.Add(1)
	go func() { // scrapes while the writer runs
		defer scrapes.Done()
		for {
			select {
			case <-done:
				return
			default:
				sdktest.Collect(t, c, 0)
				time.Sleep(3 * time.Millisecond)
			}
		}
	}()
	<-done
	scrapes.Wait()
	got := samples(t, strings.NewReader(collectText(t, sdktest.Collect(t, c, 0))), "hostname")
	a := `{agent_name="rank-0"}`
	wantValues(t, got, map[string]float64{
		"agent_tx_bytes_total" + a:          float64(wantTx),
		"agent_tx_requests_num_total" + a:   transfers,
		"agent_xfer_time_total" + a:         float64(wantXfer),
		"agent_xfer_time_us_count" + a:      transfers,
		"agent_xfer_post_time_us_count" + a: transfers,
		"agent_tx_last_bytes" + a:           transfers * 3,
		"agent_xfer_time" + a:               transfers,
		`nixl_reader_errors_total{agent_name="rank-0",reason="read_pos_moved"}`: 0,
		`nixl_reader_errors_total{agent_name="rank-0",reason="unknown_event"}`:  0,
	})
	if w.dropped == 0 {
		t.Log("the writer never found the ring full; the test did not exercise waiting")
	}
	if w.unread() != 0 {
		t.Errorf("%d events left unread after the final scrape", w.unread())
	}
}

// TestTruncatedUnderReader: a ring that shrinks under its mapping is a
// counted reader error, never a crash; the agent's sums stay, and a
// smaller ring written under the same name (an agent restart) is read
// again.
func TestTruncatedUnderReader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent")
	w := newRingWriter(t, path, layoutV4, 64)
	w.write(event{evTxBytes, 100})
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Config: map[string]any{"telemetry_dirs": []any{dir}, "hostname": "h"}})
	sdktest.Collect(t, c, 0)
	w.close()

	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	// The next pass finds the file shrunk (reported), unmaps it, and
	// refuses what is left (no ring); the agent's sums stay.
	res := sdktest.Collect(t, c, 0)
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != "reader" || !strings.Contains(res.Errors[0].GetMessage(), "is shorter than the 40-byte header") && !strings.Contains(res.Errors[0].GetMessage(), "not a multiple") {
		t.Fatalf("errors %v", res.Errors)
	}
	want := map[string]float64{
		`nixl_reader_errors_total{agent_name="agent",reason="truncated"}`:      1,
		`nixl_reader_errors_total{agent_name="agent",reason="invalid_header"}`: 1,
		`agent_tx_bytes_total{agent_name="agent"}`:                             100,
		`nixl_collection_errors_total{collector="reader"}`:                     2,
	}
	wantValues(t, samples(t, strings.NewReader(collectText(t, res)), "hostname"), want)
	// Refused once, not on every rescan.
	sdktest.Collect(t, c, 0)
	res = sdktest.Collect(t, c, 0)
	if len(res.Errors) != 0 {
		t.Errorf("errors again: %v", res.Errors)
	}
	wantValues(t, samples(t, strings.NewReader(collectText(t, res)), "hostname"), want)

	// An active ring that shrinks is caught by the drain's own size check.
	other := filepath.Join(dir, "other")
	w2 := newRingWriter(t, other, layoutV4, 64)
	sdktest.Collect(t, c, 0)
	w2.write(event{evTxBytes, 1})
	w2.close()
	if err := os.Truncate(other, 40+16*32); err != nil {
		t.Fatal(err)
	}
	wantValues(t, samples(t, strings.NewReader(collectText(t, sdktest.Collect(t, c, 0))), "hostname"), map[string]float64{
		`nixl_reader_errors_total{agent_name="other",reason="truncated"}`: 1,
		`agent_tx_bytes_total{agent_name="other"}`:                        0,
	})

	// The agent restarts with a 16-slot ring: read again, sums go on.
	w = newRingWriter(t, path, layoutV4, 16)
	w.write(event{evTxBytes, 5})
	got := samples(t, strings.NewReader(collectText(t, sdktest.Collect(t, c, 0))), "hostname")
	wantValues(t, got, map[string]float64{
		`agent_tx_bytes_total{agent_name="agent"}`:                        105,
		`nixl_buffer_capacity_events{agent_name="agent"}`:                 16,
		`nixl_reader_errors_total{agent_name="agent",reason="truncated"}`: 1,
	})
}

// TestFaultGuard: the race the size check cannot close (a truncate
// between fstat and the copy) faults the mapping; the guard turns that
// into a truncated error and nothing is consumed.
func TestFaultGuard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent")
	w := newRingWriter(t, path, layoutV4, 1024)
	for i := 0; i < 1000; i++ {
		w.write(event{evTxBytes, 1})
	}
	r, err := openRing(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	w.close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var scratch []byte
	res, err := r.consume(&scratch, func() error { return nil }) // skips drain's fstat
	fe, ok := err.(*formatError)
	if !ok || fe.reason != reasonTruncated || !strings.Contains(fe.msg, "memory fault") || len(res.run) != 0 {
		t.Fatalf("consume on a truncated mapping: %v, %d bytes", err, len(res.run))
	}
	// drain on the empty file: even the header is past the end
	if _, err := r.drain(&scratch); err == nil || !strings.Contains(err.Error(), "memory fault") {
		t.Fatalf("drain: %v", err)
	}
}

// TestReadOnlyFile: a ring the plugin may not write is refused with the
// reason and what to do, never read (reading alone would freeze it).
func TestReadOnlyFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes mode-0444 files; the sandbox test covers a plugin user without write permission")
	}
	dir := t.TempDir()
	newRingWriter(t, filepath.Join(dir, "agent"), layoutV4, 8).write(event{evTxBytes, 1})
	os.Chmod(filepath.Join(dir, "agent"), 0o444)
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{"telemetry_dirs": []any{dir}}})
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), "needs write permission") {
		t.Fatalf("errors %v", res.Errors)
	}
	sdktest.Lacks(t, collectText(t, res), "agent_tx_bytes_total")
}

// fakeProc is a procfs with one process, pid 42, mapping the files given.
func fakeProc(t *testing.T, mapped ...string) string {
	t.Helper()
	root := t.TempDir()
	setFakeMaps(t, root, mapped...)
	return root
}

func setFakeMaps(t *testing.T, root string, mapped ...string) {
	t.Helper()
	os.MkdirAll(filepath.Join(root, "42"), 0o755)
	var b strings.Builder
	b.WriteString("55d4c5a00000-55d4c5a21000 r--p 00000000 00:00 0                          [heap]\n")
	for _, p := range mapped {
		id, err := statID(p)
		if err != nil {
			t.Fatal(err)
		}
		maj, mnr := uint32((id.dev>>8)&0xfff|(id.dev>>32)&^0xfff), uint32(id.dev&0xff|(id.dev>>12)&^0xff)
		fmt.Fprintf(&b, "7f1c2a000000-7f1c2a001000 rw-s 00000000 %02x:%02x %d                    %s\n", maj, mnr, id.ino, p)
	}
	if err := os.WriteFile(filepath.Join(root, "42", "maps"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// staleDrainer is a drainer of dir with stale_after 1m and a clock the
// test moves; step advances it, runs a pass and returns tx bytes by agent.
func staleDrainer(t *testing.T, dir, procfs string, liveness bool) (*drainer, func(time.Duration) map[string]uint64) {
	c := defaultConfig()
	c.TelemetryDirs = []string{dir}
	c.StaleAfter.Duration = time.Minute
	c.LivenessCheck = &liveness
	d := newDrainer(c, procfs)
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	t.Cleanup(d.closeAll)
	return d, func(dt time.Duration) map[string]uint64 {
		now = now.Add(dt)
		d.pass(true)
		out := map[string]uint64{}
		for _, a := range d.snapshot().agents {
			if a.valid {
				out[a.name] = a.stats.sum[evTxBytes]
			}
		}
		return out
	}
}

// TestStaleAgentExpiry: an idle ring stays while its agent has it open
// (mapped) or its write_pos moves; once neither holds for stale_after its
// series are dropped, the file is left alone, and it comes back (counters
// from 0) when an agent of the same name writes it again.
func TestStaleAgentExpiry(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent")
	w := newRingWriter(t, path, layoutV4, 64) // maps the file, holds no descriptor: as NIXL
	w.write(event{evTxBytes, 7})
	d, step := staleDrainer(t, dir, "", true)
	if got := step(0); got["agent"] != 7 {
		t.Fatalf("first pass: %v", got)
	}
	if got := step(2 * time.Minute); got["agent"] != 7 {
		t.Fatalf("idle but mapped by its agent: dropped (%v)", got)
	}
	w.write(event{evTxBytes, 1})
	if got := step(45 * time.Second); got["agent"] != 8 {
		t.Fatalf("active: %v", got)
	}
	w.close() // the agent exits
	if got := step(59 * time.Second); got["agent"] != 8 {
		t.Fatalf("idle for less than stale_after: %v", got)
	}
	if got := step(2 * time.Second); len(got) != 0 || d.snapshot().expired != 1 {
		t.Fatalf("idle and unmapped for stale_after: still %v", got)
	}
	if got := step(time.Hour); len(got) != 0 {
		t.Fatalf("an expired ring came back unchanged: %v", got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file of an expired agent must stay: %v", err)
	}
	w = newRingWriter(t, path, layoutV4, 64) // a same-name restart resets the header
	w.write(event{evTxBytes, 100})
	if got := step(time.Second); got["agent"] != 100 {
		t.Fatalf("written again: %v, want a new incarnation with 100", got)
	}
}

// TestStaleProcfsFallback: when the lease cannot answer (a plugin that is
// not the file's owner), procfs mappings decide; with liveness_check off,
// idleness alone does.
func TestStaleProcfsFallback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent")
	newRingWriter(t, path, layoutV4, 64).write(event{evTxBytes, 7}) // stays mapped
	proc := fakeProc(t, path)
	d, step := staleDrainer(t, dir, proc, true)
	d.openElsewhere = func(*ringFile) (bool, error) { return false, unix.EACCES }
	step(0)
	if got := step(2 * time.Minute); got["agent"] != 7 {
		t.Fatalf("mapped by pid 42: dropped (%v)", got)
	}
	setFakeMaps(t, proc) // pid 42 no longer maps it
	if got := step(2 * time.Minute); len(got) != 0 {
		t.Fatalf("no process maps it: still %v", got)
	}

	other := t.TempDir()
	newRingWriter(t, filepath.Join(other, "agent"), layoutV4, 64).write(event{evTxBytes, 7})
	_, step = staleDrainer(t, other, "", false)
	step(0)
	if got := step(61 * time.Second); len(got) != 0 {
		t.Fatalf("liveness_check off: an idle ring stays (%v)", got)
	}
}

// TestLivenessRealProcfs: another process mapping the ring (with its
// descriptor closed, as NIXL) is seen by the lease probe and in the real
// procfs; the plugin's own mapping does not count.
func TestLivenessRealProcfs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent")
	newRingWriter(t, path, layoutV4, 8).close()
	r, err := openRing(path) // the reader's own mapping, as in the plugin
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	want := map[fileID]bool{r.id: true}
	if found, _ := mappedFiles("/proc", want); found[r.id] {
		t.Fatal("the reader's own mapping counted as a live agent")
	}
	if inUse, err := r.openElsewhere(); err != nil || inUse {
		t.Fatalf("lease probe with no agent: %v, %v", inUse, err)
	}

	// an agent: this test binary again, mapping the file until its
	// stdin closes
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$")
	cmd.Env = append(os.Environ(), "NIXL_TEST_AGENT_RING="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if _, err := stdout.Read(make([]byte, 1)); err != nil { // mapped
		t.Fatal(err)
	}
	if found, _ := mappedFiles("/proc", want); !found[r.id] {
		t.Fatal("the agent's mapping is not found in /proc")
	}
	if inUse, err := r.openElsewhere(); err != nil || !inUse {
		t.Fatalf("lease probe with the agent mapping the ring: %v, %v", inUse, err)
	}
}

// TestHelperAgent is the agent process of TestLivenessRealProcfs.
func TestHelperAgent(t *testing.T) {
	path := os.Getenv("NIXL_TEST_AGENT_RING")
	if path == "" {
		t.Skip("run by TestLivenessRealProcfs")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, headerSize+8*16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // NIXL keeps only the mapping
	os.Stdout.Write([]byte("m"))
	io.Copy(io.Discard, os.Stdin)
	unix.Munmap(data)
}

// TestRemovedFile: an unlinked ring is drained one last time, then its
// series go.
func TestRemovedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent")
	w := newRingWriter(t, path, layoutV4, 8)
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Config: map[string]any{"telemetry_dirs": []any{dir}}})
	sdktest.Contains(t, collectText(t, sdktest.Collect(t, c, 0)), `agent_tx_bytes_total{hostname=`)
	w.write(event{evTxBytes, 1})
	os.Remove(path)
	text := collectText(t, sdktest.Collect(t, c, 0))
	sdktest.Lacks(t, text, `agent_name="agent"`)
	sdktest.Contains(t, text, "nixl_agents 0")
}

// TestDuplicateName: the same agent name in two directories is read from
// the first only, and the second is reported.
func TestDuplicateName(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	newRingWriter(t, filepath.Join(a, "rank"), layoutV4, 8).write(event{evTxBytes, 1})
	newRingWriter(t, filepath.Join(b, "rank"), layoutV4, 8).write(event{evTxBytes, 2})
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Config: map[string]any{"telemetry_dirs": []any{a, b}}})
	got := samples(t, strings.NewReader(collectText(t, res)), "hostname")
	wantValues(t, got, map[string]float64{
		`agent_tx_bytes_total{agent_name="rank"}`:                             1,
		`nixl_reader_errors_total{agent_name="rank",reason="duplicate_name"}`: 1,
	})
}

// TestDiscovery: a directory that does not exist yet is no error (NIXL
// does not create it); one that cannot be listed is a discovery error,
// reported once per scrape and counted every time; files that are no
// ring are refused once.
func TestDiscovery(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "later")
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	junkDir := t.TempDir()
	os.WriteFile(filepath.Join(junkDir, "README"), []byte("not a ring\n"), 0o644)
	os.Mkdir(filepath.Join(junkDir, "sub"), 0o755)
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Config: map[string]any{
		"telemetry_dirs": []any{missing, notDir, junkDir},
		// only the forced rescans (at start and per scrape), so the count is exact
		"rescan_interval": "1h", "stale_after": "2h",
	}})
	res := sdktest.Collect(t, c, 0)
	var collectors []string
	for _, e := range res.Errors {
		collectors = append(collectors, e.GetCollector()+": "+e.GetMessage())
	}
	if len(res.Errors) != 2 || !strings.Contains(strings.Join(collectors, "\n"), "list telemetry directory "+notDir) ||
		!strings.Contains(strings.Join(collectors, "\n"), "shorter than the 40-byte header") {
		t.Fatalf("errors:\n%s", strings.Join(collectors, "\n"))
	}
	got := samples(t, strings.NewReader(collectText(t, res)), "hostname")
	wantValues(t, got, map[string]float64{
		`nixl_collection_errors_total{collector="discovery"}`:                   2, // Configure's pass and the scrape's
		`nixl_reader_errors_total{agent_name="README",reason="invalid_header"}`: 1,
		`nixl_agents{}`: 0,
	})
	os.Mkdir(missing, 0o755)
	newRingWriter(t, filepath.Join(missing, "late"), layoutV4, 8).write(event{evTxBytes, 3})
	got = samples(t, strings.NewReader(collectText(t, sdktest.Collect(t, c, 0))), "hostname")
	wantValues(t, got, map[string]float64{
		`agent_tx_bytes_total{agent_name="late"}`:                               3,
		`nixl_reader_errors_total{agent_name="README",reason="invalid_header"}`: 1,
	})
}
