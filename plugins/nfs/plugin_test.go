package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			if out := sdktest.Promtool(t, text); strings.TrimSpace(out) != "" {
				t.Errorf("promtool check metrics:\n%s", out)
			}
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
		mustContain(t, res.Text(t), `nfs_rpc_count_total{volume_id="a",nfs_operation="read"} 0`,
			`nfs_collection_errors_total{collector="mount"} 2`)
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
