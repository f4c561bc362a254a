package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// procRoot lays out a procfs root the way the kernel does for the plugin:
// <root>/4242/{mountstats,net/tcp,net/tcp6} and <root>/self -> 4242, from
// flat fixture files in testdata/ ("" leaves a file out).
func procRoot(t *testing.T, mountstats, tcp, tcp6 string) string {
	t.Helper()
	root := t.TempDir()
	pid := filepath.Join(root, "4242")
	if err := os.MkdirAll(filepath.Join(pid, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("4242", filepath.Join(root, "self")); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{mountstats: "mountstats", tcp: "net/tcp", tcp6: "net/tcp6"} {
		if src == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(pid, dst), readTestdata(t, src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mustContain fails for each of lines the exposition does not have at the
// end of a line: a sample with its exact value (sdktest.Contains would also
// accept a longer value).
func mustContain(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("exposition lacks %q", l)
		}
	}
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name, mountstats, tcp, tcp6 string
		wantErrors                  int
	}{
		{"nfs4.2-nconnect4", "mountstats-nfs4.2-nconnect4", "tcp-synthetic", "tcp6-synthetic", 0},
		{"nfs3-tcp", "mountstats-nfs3-tcp", "tcp-synthetic", "tcp6-synthetic", 0},
		{"mixed", "mountstats-mixed", "tcp-synthetic", "tcp6-synthetic", 0},
		{"real-6.1", "mountstats-real-6.1", "tcp-real-6.1", "tcp6-real-6.1", 0},
		{"oldkernel-transports", "mountstats-oldkernel-transports", "tcp-synthetic", "", 0},
		// procfs rejects this file (28 events, 14-number tcp line); the
		// tolerant parser keeps both mounts and reports the two unreadable lines (vsock xprt, non-numeric per-op).
		{"future", "mountstats-future", "tcp-synthetic", "tcp6-synthetic", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := procRoot(t, tc.mountstats, tc.tcp, tc.tcp6)
			res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
			if res.Status != nil {
				t.Fatalf("collect failed: %v", res.Status)
			}
			if len(res.Errors) != tc.wantErrors {
				t.Errorf("got %d partial errors, want %d: %v", len(res.Errors), tc.wantErrors, res.Errors)
			}
			text := res.Text(t)
			sdktest.Golden(t, text, filepath.Join("testdata", tc.name+".golden"))
			sdktest.PromtoolClean(t, text, nil) // no seed name draws a finding
		})
	}
}

// TestReconnect: the v3 lanes of the real capture reconnect between two
// scrapes (new source ports, connect_count+1); xprt_idx stays, the join
// follows the new sockets, the old connection disappears.
func TestReconnect(t *testing.T) {
	root := procRoot(t, "mountstats-real-6.1", "tcp-real-6.1", "tcp6-real-6.1")
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Procfs: root})
	first := sdktest.Collect(t, c, 0)
	text1 := (&sdktest.Result{Batches: first.Batches}).Text(t)
	mustContain(t, text1,
		`nfs_xprt_tcp_state{volume_id="export@/mnt/n3",xprt_idx="0"} 1`,
		`nfs_xprt_connect_count_total{volume_id="export@/mnt/n3",xprt_idx="0"} 2`,
		`nfs_server_tcp_state{server="127.0.0.1",conn="127.0.0.1:759"} 1`)

	ms := string(readTestdata(t, "mountstats-real-6.1"))
	ms = strings.Replace(ms, "xprt:\ttcp 759 1 2 0 0 42 42", "xprt:\ttcp 760 1 3 0 0 50 50", 1)
	ms = strings.Replace(ms, "xprt:\ttcp 949 1 2 0 0 41 41", "xprt:\ttcp 950 1 3 0 0 49 49", 1)
	tcp := string(readTestdata(t, "tcp-real-6.1"))
	tcp = strings.Replace(tcp, "0100007F:02F7 0100007F:0801", "0100007F:02F8 0100007F:0801", 1) // 759 -> 760
	tcp = strings.Replace(tcp, "0100007F:03B5 0100007F:0801", "0100007F:03B6 0100007F:0801", 1) // 949 -> 950
	if err := os.WriteFile(filepath.Join(root, "4242", "mountstats"), []byte(ms), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "4242", "net", "tcp"), []byte(tcp), 0o644); err != nil {
		t.Fatal(err)
	}

	second := sdktest.Collect(t, c, 0)
	if len(second.Errors) != 0 {
		t.Fatalf("errors: %v", second.Errors)
	}
	text2 := (&sdktest.Result{Batches: second.Batches}).Text(t)
	mustContain(t, text2,
		`nfs_xprt_tcp_state{volume_id="export@/mnt/n3",xprt_idx="0"} 1`,
		`nfs_xprt_tcp_state{volume_id="export@/mnt/n3",xprt_idx="1"} 1`,
		`nfs_xprt_connect_count_total{volume_id="export@/mnt/n3",xprt_idx="0"} 3`,
		`nfs_xprt_sends_total{volume_id="export@/mnt/n3",xprt_idx="1"} 49`,
		`nfs_server_tcp_state{server="127.0.0.1",conn="127.0.0.1:760"} 1`,
		`nfs_server_tcp_state{server="127.0.0.1",conn="127.0.0.1:950"} 1`)
	sdktest.Lacks(t, text2, `conn="127.0.0.1:759"`, `conn="127.0.0.1:949"`, `xprt_idx="2"`)
}

// TestSourceErrors: unreadable sources are partial errors, counted in
// nfs_collection_errors_total, never a failed scrape.
func TestSourceErrors(t *testing.T) {
	// A missing source is one partial error of its collector; what the
	// other source gives is still exported.
	for _, tc := range []struct {
		name, mountstats, tcp string
		collector             string
		want, absent          []string
	}{
		{
			name: "missing mountstats", tcp: "tcp-synthetic", collector: "mountstats",
			want:   []string{`nfs_collection_errors_total{collector="mountstats"} 1`},
			absent: []string{"nfs_rpc_count_total"},
		},
		{
			name: "missing tcp table: no socket families, lanes still exported", mountstats: "mountstats-nfs3-tcp", collector: "tcp",
			want:   []string{`nfs_xprt_sends_total{volume_id="home",xprt_idx="0"} 6.0876097e+07`, `nfs_collection_errors_total{collector="tcp"} 1`},
			absent: []string{"nfs_xprt_tcp_state", "nfs_server_tcp_state"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: procRoot(t, tc.mountstats, tc.tcp, "")})
			if res.Status != nil || len(res.Errors) != 1 || res.Errors[0].GetCollector() != tc.collector {
				t.Fatalf("status %v errors %v", res.Status, res.Errors)
			}
			text := res.Text(t)
			mustContain(t, text, tc.want...)
			sdktest.Lacks(t, text, tc.absent...)
		})
	}
	t.Run("mountstats is a directory", func(t *testing.T) {
		dir := t.TempDir()
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: dir, Config: map[string]any{"mountstats_path": dir}})
		if res.Status != nil || len(res.Errors) != 1 {
			t.Fatalf("status %v errors %v", res.Status, res.Errors)
		}
	})
	t.Run("permission denied", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads mode-000 files")
		}
		root := procRoot(t, "mountstats-nfs3-tcp", "tcp-synthetic", "")
		if err := os.Chmod(filepath.Join(root, "4242", "mountstats"), 0); err != nil {
			t.Fatal(err)
		}
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
		if res.Status != nil || len(res.Errors) != 1 || res.Errors[0].GetCollector() != "mountstats" {
			t.Fatalf("status %v errors %v", res.Status, res.Errors)
		}
	})
	t.Run("garbage tcp rows are skipped and reported", func(t *testing.T) {
		root := procRoot(t, "mountstats-nfs3-tcp", "tcp-synthetic", "")
		f := filepath.Join(root, "4242", "net", "tcp")
		data, _ := os.ReadFile(f)
		data = append(data, []byte("  99: zz:zz 00:00 01 x\n")...)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
		if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), "1 unparseable rows") {
			t.Fatalf("errors %v", res.Errors)
		}
		mustContain(t, res.Text(t), `nfs_xprt_tcp_state{volume_id="home",xprt_idx="0"} 1`)
	})
	t.Run("garbage mountstats", func(t *testing.T) {
		dir := t.TempDir()
		f := filepath.Join(dir, "ms")
		if err := os.WriteFile(f, []byte("device x:/a mounted on /a with fstype nfs statvers=1.1\n\tage:\tnope\n\tper-op statistics\n\tREAD: 1 2\n\ngarbage\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: dir, Config: map[string]any{"mountstats_path": f}})
		mountErrs := 0
		for _, e := range res.Errors {
			if e.GetCollector() == "mount" {
				mountErrs++
			}
		}
		if res.Status != nil || mountErrs != 2 {
			t.Fatalf("status %v errors %v", res.Status, res.Errors)
		}
		text := res.Text(t)
		mustContain(t, text, `nfs_collection_errors_total{collector="mount"} 2`)
		// Neither the unreadable age nor the truncated READ line exports anything.
		sdktest.Lacks(t, text, `nfs_rpc_count_total{volume_id="a"`, `nfs_mount_age_seconds{volume_id="a"`)
	})
}

// TestAllowlistSkipsSockets: with no socket family enabled the tables are
// not read (a missing table then raises no error).
func TestAllowlistSkipsSockets(t *testing.T) {
	root := procRoot(t, "mountstats-nfs3-tcp", "", "")
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root, EnabledMetrics: []string{"nfs_xprt_sends_total"}})
	if len(res.Errors) != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	mustContain(t, res.Text(t), `nfs_xprt_sends_total{volume_id="home",xprt_idx="0"} 6.0876097e+07`)
}

// TestMountUnmountKeepsCountersMonotonic: the same export mounted twice
// (two superblocks) plus a bind mount of the first, then the second
// unmounted, then mounted again (a new superblock with small counters):
// the volume's counters are the sum of its superblocks, the bind mount
// counts once, and no exported counter ever decreases.
func TestMountUnmountKeepsCountersMonotonic(t *testing.T) {
	nfs := string(readTestdata(t, "mountstats-nfs3-tcp"))
	nfs = nfs[strings.Index(nfs, "device 10.20.0.7"):]
	const read1 = "READ: 4210998 4211002"
	at := func(mp, read string) string {
		b := strings.Replace(nfs, "mounted on /home ", "mounted on "+mp+" ", 1)
		return strings.Replace(b, read1, read, 1)
	}
	root := procRoot(t, "", "tcp-synthetic", "")
	write := func(devs map[string]string, blocks ...string) {
		t.Helper()
		ms := "device proc mounted on /proc with fstype proc\n" + strings.Join(blocks, "")
		var mi strings.Builder
		n := 20
		for _, line := range strings.Split(ms, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 || f[0] != "device" {
				continue
			}
			dev := devs[f[4]]
			if dev == "" {
				dev = "0:5"
			}
			n++
			fmt.Fprintf(&mi, "%d 1 %s / %s rw - %s %s rw\n", n, dev, f[4], f[7], f[1])
		}
		for name, data := range map[string]string{"mountstats": ms, "mountinfo": mi.String()} {
			if err := os.WriteFile(filepath.Join(root, "4242", name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Procfs: root})
	scrape := func() map[string]float64 {
		t.Helper()
		res := sdktest.Collect(t, c, 0)
		if len(res.Errors) != 0 {
			t.Fatalf("errors: %v", res.Errors)
		}
		return counterSamples(t, (&sdktest.Result{Batches: res.Batches}).Text(t))
	}
	readOps := `nfs_rpc_count_total{volume_id="home",nfs_operation="read"}`

	// Two superblocks (0:50 with a bind mount, 0:51) of one export.
	write(map[string]string{"/home": "0:50", "/srv/home": "0:50", "/home-ro": "0:51"},
		at("/home", "READ: 1000 1000"), at("/srv/home", "READ: 1000 1000"), at("/home-ro", "READ: 300 300"))
	s1 := scrape()
	if s1[readOps] != 1300 {
		t.Fatalf("READ ops = %v, want 1000 (the bind mount once) + 300", s1[readOps])
	}
	// /home-ro unmounted; /home did 10 more reads.
	write(map[string]string{"/home": "0:50", "/srv/home": "0:50"},
		at("/home", "READ: 1010 1010"), at("/srv/home", "READ: 1010 1010"))
	s2 := scrape()
	if s2[readOps] != 1310 {
		t.Errorf("READ ops after the unmount = %v, want 1310: the departed superblock's 300 are kept", s2[readOps])
	}
	noDecrease(t, s1, s2)
	// Mounted again: a new superblock (0:52) starting from 5.
	write(map[string]string{"/home": "0:50", "/srv/home": "0:50", "/home-ro": "0:52"},
		at("/home", "READ: 1010 1010"), at("/srv/home", "READ: 1010 1010"), at("/home-ro", "READ: 5 5"))
	s3 := scrape()
	if s3[readOps] != 1315 {
		t.Errorf("READ ops after the remount = %v, want 1315", s3[readOps])
	}
	noDecrease(t, s2, s3)
}

// counterSamples maps every counter sample of an exposition (a *_total
// series) to its value.
func counterSamples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series := line[:i]
		name, _, _ := strings.Cut(series, "{")
		if !strings.HasSuffix(name, "_total") {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[series] = v
	}
	return out
}

func noDecrease(t *testing.T, before, after map[string]float64) {
	t.Helper()
	for s, v := range before {
		if w, ok := after[s]; ok && w < v {
			t.Errorf("%s went from %v to %v", s, v, w)
		}
	}
}

// TestNeverInvented: what a kernel did not print for a mount gets no
// sample (issue cases: 8-number per-op lines, NFSv4 without FSSTAT and
// READDIRPLUS, a negative sum printed unsigned), and NFSv4's STATFS answers
// for fsstat.
func TestNeverInvented(t *testing.T) {
	t.Run("old kernel: no errors field", func(t *testing.T) {
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: procRoot(t, "mountstats-oldkernel-transports", "tcp-synthetic", "")})
		text := res.Text(t)
		mustContain(t, text, `nfs_rpc_count_total{volume_id="old",nfs_operation="getattr"} 110`)
		sdktest.Lacks(t, text, `nfs_rpc_errors_total{volume_id="old"`)
	})
	t.Run("NFSv4: STATFS is fsstat, no readdirplus", func(t *testing.T) {
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: procRoot(t, "mountstats-nfs4.2-nconnect4", "tcp-synthetic", "tcp6-synthetic")})
		text := res.Text(t)
		mustContain(t, text, `nfs_rpc_count_total{volume_id="datasets",nfs_operation="fsstat"} 9013`)
		sdktest.Lacks(t, text, `nfs_operation="readdirplus"`)
	})
	t.Run("negative sum printed unsigned", func(t *testing.T) {
		ms := string(readTestdata(t, "mountstats-nfs3-tcp"))
		line := regexp.MustCompile(`(?m)^\s+READ: .*$`).FindString(ms)
		f := strings.Fields(line)
		f[8] = "18446743919241604546" // the execute time sum
		ms = strings.Replace(ms, line, "\t"+strings.Join(f, " "), 1)
		root := procRoot(t, "", "tcp-synthetic", "")
		if err := os.WriteFile(filepath.Join(root, "4242", "mountstats"), []byte(ms), 0o644); err != nil {
			t.Fatal(err)
		}
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
		if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].GetMessage(), "per-op READ field 8 = 18446743919241604546") {
			t.Fatalf("errors: %v", res.Errors)
		}
		text := res.Text(t)
		sdktest.Lacks(t, text, `nfs_rpc_execute_seconds_total{volume_id="home",nfs_operation="read"}`)
		mustContain(t, text, `nfs_collection_errors_total{collector="mount"} 1`)
		sdktest.Contains(t, text, `nfs_rpc_rtt_seconds_total{volume_id="home",nfs_operation="read"}`)
	})
}

// TestMountTableRace: mountinfo is read right after mountstats, so a mount
// or unmount between the two reads makes them disagree in one scrape, in
// the middle of the list (testdata/mount{stats,info}-race-N):
//
//  1. both list /mnt/datasets, /home and /mnt/checkpoints;
//  2. /home unmounted between the reads: mountinfo lacks it;
//  3. /mnt/scratch mounted between the reads: mountstats lacks it;
//  4. both list /mnt/datasets, /mnt/scratch and /mnt/checkpoints;
//  5. mountinfo unreadable: no volume is exported;
//  6. as 4 again.
//
// Blocks are matched to mountinfo by identity, so in every scrape each
// exported counter is exactly what the kernel printed for that mount
// (prometheus/procfs reading the same file is the oracle); a block without
// its mountinfo line (/home in 2) is left out of that scrape with a
// mountinfo error instead of being given another identity, which the
// history would book as a departed superblock (counters doubled, tripled);
// a volume left out keeps its history, so it comes back at the kernel's
// values.
func TestMountTableRace(t *testing.T) {
	root := procRoot(t, "", "tcp-synthetic", "tcp6-synthetic")
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Procfs: root})
	steps := []struct {
		fixture    int // mount{stats,info}-race-N; mountinfo is a directory when unreadable
		vols       []string
		errorsFor  []string // what the mountinfo errors name
		unreadable bool
	}{
		{fixture: 1, vols: []string{"checkpoints", "datasets", "home"}},
		{fixture: 2, vols: []string{"checkpoints", "datasets"}, errorsFor: []string{"mount /home "}},
		{fixture: 3, vols: []string{"checkpoints", "datasets"}},
		{fixture: 4, vols: []string{"checkpoints", "datasets", "scratch"}},
		{fixture: 4, unreadable: true, errorsFor: []string{"is a directory: no NFS volume exported"}},
		{fixture: 4, vols: []string{"checkpoints", "datasets", "scratch"}},
	}
	mountinfoErrors := 0
	for n, step := range steps {
		ms, mi := fmt.Sprintf("mountstats-race-%d", step.fixture), fmt.Sprintf("mountinfo-race-%d", step.fixture)
		name := fmt.Sprintf("step %d (%s)", n+1, ms)
		for src, dst := range map[string]string{ms: "mountstats", mi: "mountinfo"} {
			path := filepath.Join(root, "4242", dst)
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			if dst == "mountinfo" && step.unreadable {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(path, readTestdata(t, src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		res := sdktest.Collect(t, c, 0)
		var named []string
		for _, e := range res.Errors {
			if e.GetCollector() != "mountinfo" {
				t.Errorf("%s: unexpected error %v", name, e)
				continue
			}
			named = append(named, e.GetMessage())
		}
		if len(named) != len(step.errorsFor) {
			t.Errorf("%s: mountinfo errors %q, want one for each of %v", name, named, step.errorsFor)
		}
		for i, what := range step.errorsFor {
			if i < len(named) && !strings.Contains(named[i], what) {
				t.Errorf("%s: error %q does not say %q", name, named[i], what)
			}
		}
		mountinfoErrors += len(step.errorsFor)
		text := (&sdktest.Result{Batches: res.Batches}).Text(t)
		mustContain(t, text, fmt.Sprintf(`nfs_collection_errors_total{collector="mountinfo"} %d`, mountinfoErrors))

		want := kernelCounters(t, filepath.Join(root, "self", "mountstats"))
		got := counterSamples(t, text)
		vols := map[string]bool{}
		compared := 0
		for _, series := range slices.Sorted(maps.Keys(got)) {
			v := got[series]
			m := regexp.MustCompile(`volume_id="([^"]*)"`).FindStringSubmatch(series)
			if m == nil {
				continue
			}
			vols[m[1]] = true
			w, ok := want[series]
			if !ok {
				continue // a family kernelCounters does not know
			}
			compared++
			if v != w {
				t.Errorf("%s: %s = %v, the kernel printed %v", name, series, v, w)
			}
		}
		if got := slices.Sorted(maps.Keys(vols)); !slices.Equal(got, step.vols) {
			t.Errorf("%s: volumes %v, want %v", name, got, step.vols)
		}
		if step.unreadable {
			continue
		}
		if compared < 20*len(step.vols) {
			t.Errorf("%s: only %d samples compared", name, compared)
		}
	}
}

// kernelCounters reads mountstats with prometheus/procfs and returns, by
// series, what the kernel printed for the per-op and mount counters of
// each NFS mount (volume_id: the export's last path component).
func kernelCounters(t *testing.T, mountstats string) map[string]float64 {
	t.Helper()
	p, ok := procfsProc(mountstats)
	if !ok {
		t.Fatalf("%s: not a procfs path", mountstats)
	}
	mounts, err := p.MountStats()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range mounts {
		st, ok := m.Stats.(*procfs.MountStatsNFS)
		if !ok {
			continue
		}
		_, export := splitDevice(m.Device)
		id := filepath.Base(export)
		for _, o := range st.Operations {
			op := strings.ToLower(o.Operation)
			if m.Type == "nfs4" && op == "statfs" {
				op = "fsstat"
			}
			l := fmt.Sprintf(`{volume_id="%s",nfs_operation="%s"}`, id, op)
			out["nfs_rpc_count_total"+l] = float64(o.Requests)
			out["nfs_rpc_timeouts_total"+l] = float64(o.MajorTimeouts)
			out["nfs_bytes_sent_total"+l] = float64(o.BytesSent)
			out["nfs_bytes_received_total"+l] = float64(o.BytesReceived)
			out["nfs_rpc_errors_total"+l] = float64(o.Errors)
		}
		l := fmt.Sprintf(`{volume_id="%s"}`, id)
		for name, v := range map[string]uint64{
			"normal_read_bytes": st.Bytes.Read, "normal_write_bytes": st.Bytes.Write,
			"direct_read_bytes": st.Bytes.DirectRead, "direct_write_bytes": st.Bytes.DirectWrite,
			"server_read_bytes": st.Bytes.ReadTotal, "server_write_bytes": st.Bytes.WriteTotal,
			"read_pages": st.Bytes.ReadPages, "write_pages": st.Bytes.WritePages,
			"silly_rename_events": st.Events.SillyRename, "short_read_events": st.Events.ShortRead,
			"short_write_events": st.Events.ShortWrite, "delay_events": st.Events.JukeboxDelay,
		} {
			out["nfs_mount_"+name+"_total"+l] = float64(v)
		}
		for name, v := range map[string]uint64{"vfsopen": st.Events.VFSOpen, "inoderevalidate": st.Events.InodeRevalidate, "vfsreadpage": st.Events.VFSReadPage} {
			out[fmt.Sprintf(`nfs_mount_events_total{volume_id="%s",event="%s"}`, id, name)] = float64(v)
		}
	}
	return out
}
