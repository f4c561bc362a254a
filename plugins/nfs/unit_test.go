package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustContain(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("exposition lacks %q", l)
		}
	}
}

func mustNotContain(t *testing.T, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(text, s) {
			t.Errorf("exposition contains %q", s)
		}
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
	mustNotContain(t, text2, `conn="127.0.0.1:759"`, `conn="127.0.0.1:949"`, `xprt_idx="2"`)
}

// TestJoinRules pins the attribution rules on small hand-made inputs.
func TestJoinRules(t *testing.T) {
	mk := func(lport, rport, state, uid, inode uint64, raddr string) socket {
		r, _, _ := parseHexAddr(raddr + ":0801")
		l, _, _ := parseHexAddr("2900140A:0000")
		return socket{localIP: l, localPort: lport, remoteIP: r, remotePort: rport, state: state, uid: uid, inode: inode}
	}
	server := "0500140A" // 10.20.0.5
	v4 := func(lanes ...uint64) *volume {
		v := &volume{id: "v", port: 2049}
		v.serverIP, _, _ = parseHexAddr(server + ":0801")
		for _, p := range lanes {
			v.lanes = append(v.lanes, lane{NFSTransportStats: procfs.NFSTransportStats{Protocol: "tcp", Port: p}})
		}
		return v
	}
	t.Run("one v4 lane, one socket: attributed by elimination", func(t *testing.T) {
		j := joinSockets([]*volume{v4(0)}, []socket{mk(851, 2049, 1, 0, 7, server)}, 2049)
		if s, ok := j.lanes[lanePos{0, 0}]; !ok || s.localPort != 851 {
			t.Fatalf("lane not attributed: %+v", j.lanes)
		}
	})
	t.Run("two v4 lanes, two sockets: ambiguous", func(t *testing.T) {
		j := joinSockets([]*volume{v4(0, 0)}, []socket{mk(851, 2049, 1, 0, 7, server), mk(927, 2049, 1, 0, 8, server)}, 2049)
		if len(j.lanes) != 0 {
			t.Fatalf("guessed: %+v", j.lanes)
		}
		if len(j.servers) != 1 || len(j.servers[0].socks) != 2 {
			t.Fatalf("servers: %+v", j.servers)
		}
	})
	t.Run("v3 srcport claims, v4 gets the remaining one", func(t *testing.T) {
		v3 := v4(759)
		j := joinSockets([]*volume{v4(0), v3}, []socket{mk(851, 2049, 1, 0, 7, server), mk(759, 2049, 8, 0, 9, server)}, 2049)
		if j.lanes[lanePos{1, 0}].localPort != 759 || j.lanes[lanePos{0, 0}].localPort != 851 {
			t.Fatalf("lanes: %+v", j.lanes)
		}
	})
	t.Run("user, TIME_WAIT and other-server sockets are ignored", func(t *testing.T) {
		socks := []socket{
			mk(700, 2049, 2, 1000, 5, server),  // user probe
			mk(701, 2049, 6, 0, 0, server),     // TIME_WAIT
			mk(702, 2049, 1, 0, 6, "0700140A"), // other server
			mk(703, 20048, 1, 0, 7, server),    // mountd
		}
		j := joinSockets([]*volume{v4(0, 700, 701, 702, 703)}, socks, 2049)
		if len(j.lanes) != 0 || len(j.servers[0].socks) != 0 {
			t.Fatalf("lanes %+v servers %+v", j.lanes, j.servers)
		}
	})
	t.Run("two sockets with the srcport: ambiguous", func(t *testing.T) {
		j := joinSockets([]*volume{v4(759)}, []socket{mk(759, 2049, 1, 0, 7, server), mk(759, 2049, 8, 0, 8, server)}, 2049)
		if len(j.lanes) != 0 {
			t.Fatalf("guessed: %+v", j.lanes)
		}
	})
}

// TestVolumeRules: identical blocks (same superblock) count once; another
// superblock of the same server/version is max-merged; another version is
// kept apart under volume_id@mountpoint; the regex picks the id.
func TestVolumeRules(t *testing.T) {
	block := string(readTestdata(t, "mountstats-nfs3-tcp"))
	i := strings.Index(block, "device 10.20.0.7")
	nfs := block[i:]
	bind := strings.Replace(nfs, "mounted on /home ", "mounted on /srv/home ", 1)
	busier := strings.Replace(strings.Replace(nfs, "mounted on /home ", "mounted on /pod/home ", 1),
		"READ: 4210998 4211002", "READ: 9999999 9999999", 1)
	v4 := strings.Replace(strings.Replace(nfs, "fstype nfs statvers", "fstype nfs4 statvers", 1), "vers=3,", "vers=4.2,", 1)
	v4 = strings.Replace(v4, "mounted on /home ", "mounted on /mnt/v4 ", 1)
	mounts, errs := parseMountstatsTolerant([]byte(nfs + bind + busier + v4))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	namer, _ := newVolumeNamer(`([^/]+)/*$`)
	vols := buildVolumes(mounts, namer, 2049)
	if len(vols) != 2 || vols[0].id != "home" || vols[1].id != "home@/mnt/v4" {
		t.Fatalf("volumes: %v", ids(vols))
	}
	if got := vols[0].ops["read"].Requests; got != 9999999 {
		t.Errorf("merged READ ops = %d, want the max 9999999", got)
	}
	if got := vols[0].ops["read"].Transmissions; got != 9999999 {
		t.Errorf("merged READ trans = %d", got)
	}
	if len(vols[0].lanes) != 1 || vols[0].lanes[0].Port != 833 || vols[0].lanes[0].srcportConflict {
		t.Errorf("lanes: %+v", vols[0].lanes)
	}

	named, err := newVolumeNamer(`^/export/(?P<volume_id>[a-z]+)$`)
	if err != nil {
		t.Fatal(err)
	}
	if got := named.name("/export/home"); got != "home" {
		t.Errorf("named group: %q", got)
	}
	if got := named.name("/other/x"); got != "/other/x" {
		t.Errorf("no match must fall back to the export path, got %q", got)
	}
	if got := namer.name("/"); got != "/" {
		t.Errorf("root export: %q", got)
	}
}

func ids(vs []*volume) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.id)
	}
	return out
}

// TestProcfsAndTolerantAgree: on every file procfs accepts, the fallback
// parser yields exactly what procfs yields.
func TestProcfsAndTolerantAgree(t *testing.T) {
	for _, f := range []string{"mountstats-nfs4.2-nconnect4", "mountstats-nfs3-tcp", "mountstats-mixed",
		"mountstats-real-6.1", "mountstats-real-6.1-labrun1", "mountstats-oldkernel-transports"} {
		root := procRoot(t, f, "", "")
		p, ok := procfsProc(filepath.Join(root, "self", "mountstats"))
		if !ok {
			t.Fatalf("%s: procfs path not recognised", f)
		}
		want, err := procfsMountStats(p)
		if err != nil {
			t.Fatalf("%s: procfs: %v", f, err)
		}
		got, errs := parseMountstatsTolerant(readTestdata(t, f))
		if len(errs) != 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: tolerant parser differs from procfs", f)
			for i := range min(len(want), len(got)) {
				if !reflect.DeepEqual(want[i], got[i]) {
					t.Errorf("first difference at mount %d (%s):\nprocfs   %+v\ntolerant %+v", i, want[i].Mount, want[i].Stats, got[i].Stats)
					break
				}
			}
		}
	}
	// And the file procfs rejects is really rejected (else the future
	// golden would not test the fallback).
	root := procRoot(t, "mountstats-future", "", "")
	p, _ := procfsProc(filepath.Join(root, "self", "mountstats"))
	if _, err := procfsMountStats(p); err == nil {
		t.Error("procfs accepted mountstats-future; the fallback is untested")
	}
}

// TestSourceErrors: unreadable sources are partial errors, counted in
// nfs_collection_errors_total, never a failed scrape.
func TestSourceErrors(t *testing.T) {
	t.Run("missing mountstats", func(t *testing.T) {
		root := procRoot(t, "", "tcp-synthetic", "")
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
		if res.Status != nil || len(res.Errors) != 1 || res.Errors[0].GetCollector() != "mountstats" {
			t.Fatalf("status %v errors %v", res.Status, res.Errors)
		}
		text := res.Text(t)
		mustContain(t, text, `nfs_collection_errors_total{collector="mountstats"} 1`)
		mustNotContain(t, text, "nfs_rpc_count_total")
	})
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
	t.Run("missing tcp table: no socket families, lanes still exported", func(t *testing.T) {
		root := procRoot(t, "mountstats-nfs3-tcp", "", "")
		res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root})
		if res.Status != nil || len(res.Errors) != 1 || res.Errors[0].GetCollector() != "tcp" {
			t.Fatalf("status %v errors %v", res.Status, res.Errors)
		}
		text := res.Text(t)
		mustContain(t, text, `nfs_xprt_sends_total{volume_id="home",xprt_idx="0"} 6.0876097e+07`,
			`nfs_collection_errors_total{collector="tcp"} 1`)
		mustNotContain(t, text, "nfs_xprt_tcp_state", "nfs_server_tcp_state")
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
		mustContain(t, res.Text(t), `nfs_rpc_count_total{volume_id="a",nfs_operation="read"} 0`,
			`nfs_collection_errors_total{collector="mount"} 2`)
	})
}

func TestConfig(t *testing.T) {
	root := procRoot(t, "mountstats-mixed", "tcp-synthetic", "tcp6-synthetic")
	res := sdktest.Run(t, newPlugin(), sdktest.Options{Procfs: root, Config: map[string]any{
		"operations":      []any{"READ", "setattr"},
		"volume_id_regex": `^/(?P<volume_id>[^/]+)`,
	}})
	text := res.Text(t)
	mustContain(t, text,
		`nfs_rpc_count_total{volume_id="export",nfs_operation="setattr"} 211093`,
		`nfs_rpc_count_total{volume_id="vol",nfs_operation="read"} 4.8211903e+07`)
	mustNotContain(t, text, `nfs_operation="getattr"`)

	for _, bad := range []map[string]any{
		{"volume_id_regex": "("},
		{"server_port": 70000},
		{"operations": []any{""}},
		{"unknown_key": 1},
	} {
		p := newPlugin()
		err := p.Configure(t.Context(), configFor(t, bad))
		if err == nil {
			t.Errorf("config %v accepted", bad)
		}
	}
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

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`10.0.0.1:/a\040b`: "10.0.0.1:/a b",
		`/mnt/x\134y\011z`: "/mnt/x\\y\tz",
		`trailing\04`:      `trailing\04`,
		`plain`:            "plain",
		`\040\040`:         "  ",
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplitDevice(t *testing.T) {
	for in, want := range map[string][2]string{
		"10.20.0.5:/vol/datasets": {"10.20.0.5", "/vol/datasets"},
		"[fd00::5]:/export":       {"fd00::5", "/export"},
		"filer:/":                 {"filer", "/"},
		"weird":                   {"", "weird"},
	} {
		s, e := splitDevice(in)
		if s != want[0] || e != want[1] {
			t.Errorf("splitDevice(%q) = %q, %q", in, s, e)
		}
	}
}

func TestParseHexAddr(t *testing.T) {
	ip, port, err := parseHexAddr("2900140A:0801")
	if err != nil || ip.String() != "10.20.0.41" || port != 2049 {
		t.Fatalf("got %v %d %v", ip, port, err)
	}
	// ::ffff:10.20.0.5 as printed in tcp6 on little endian.
	ip, _, err = parseHexAddr("0000000000000000FFFF00000500140A:0801")
	if err != nil || ip.String() != "10.20.0.5" {
		t.Fatalf("v4-mapped: %v %v", ip, err)
	}
	for _, bad := range []string{"", "0801", "2900140A", "2900140:0801", "ZZ00140A:0801", "2900140A:10000"} {
		if _, _, err := parseHexAddr(bad); err == nil {
			t.Errorf("parseHexAddr(%q) accepted", bad)
		}
	}
}

// TestRecordingRules runs promtool check rules on the shipped rules file.
func TestRecordingRules(t *testing.T) {
	sdktest.PromtoolRules(t, "nfs-recording-rules.yml")
	// Every family a rule reads must be one the plugin exports.
	rules, err := os.ReadFile("nfs-recording-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, d := range catalogue {
		known[d.Name] = true
	}
	for _, line := range strings.Split(string(rules), "\n") {
		_, expr, ok := strings.Cut(line, "expr: ")
		if !ok {
			continue
		}
		for _, tok := range strings.FieldsFunc(expr, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if strings.HasPrefix(tok, "nfs_") && !known[tok] {
				t.Errorf("rule reads unknown family %s", tok)
			}
		}
	}
}

// TestRecordingRulesOutput runs promtool test rules: the rules must produce
// the Crusoe names, labels and units (testdata/nfs-recording-rules.test.yml).
func TestRecordingRulesOutput(t *testing.T) {
	cmd := exec.Command(sdktest.PromtoolBinary(t), "test", "rules", "nfs-recording-rules.test.yml")
	cmd.Dir = "testdata"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

func configFor(t *testing.T, m map[string]any) sdk.Config {
	t.Helper()
	raw, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return sdk.Config{Raw: raw, Paths: sdk.Paths{Procfs: "/proc", Sysfs: "/sys", Rootfs: "/"}}
}
