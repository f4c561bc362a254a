package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// edit changes the unpacked fixture: path relative to its root, content
// nil to remove the file.
func edit(t *testing.T, root, path string, content []byte) {
	t.Helper()
	full := filepath.Join(root, path)
	if content == nil {
		if err := os.RemoveAll(full); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

func collectText(t *testing.T, p *plugin, opts sdktest.Options) (string, *sdktest.Result) {
	t.Helper()
	res := sdktest.Run(t, p, opts)
	if res.Status != nil {
		t.Fatalf("collect failed: %v", res.Status)
	}
	return res.Text(t), res
}

func TestNoRunDirectory(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	edit(t, root, "run/rocm-ernic", nil)
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 0 {
		t.Errorf("errors %v: a node without rocm-ernic is not a failure", res.Errors)
	}
	mustHave(t, text, "ernic_instances 0", "ernic_vms 0", "ernic_orphan_stats_files 0")
}

func TestManifestMissingOrCorrupt(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	edit(t, root, "run/rocm-ernic/instances.json", nil)
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 0 {
		t.Errorf("missing manifest: errors %v", res.Errors)
	}
	// Without a manifest every .stats file is an orphan, ignored.
	mustHave(t, text, "ernic_instances 0", "ernic_orphan_stats_files 3")
	sdktest.Lacks(t, text, "ernic_commands_total")

	for _, bad := range []string{`{"instances": [{"id": 1,`, `[1, 2]`, ``} {
		p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
		edit(t, root, "run/rocm-ernic/instances.json", []byte(bad))
		text, res := collectText(t, p, opts)
		if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorManifest || !strings.Contains(res.Errors[0].GetMessage(), "instances.json") {
			t.Errorf("%q: errors %v, want one manifest error naming the file", bad, res.Errors)
		}
		mustHave(t, text, "ernic_instances 0", `ernic_collection_errors_total{collector="manifest"} 1`)
	}
}

// TestManifestOddEntries: missing and mistyped fields get the original's
// defaults; an id that is a string matches no .stats file.
func TestManifestOddEntries(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	edit(t, root, "run/rocm-ernic/instances.json", []byte(`{"instances": [
	  {"id": 1, "pid": 2101},
	  {"id": "2", "role": "worker", "pid": "2102", "mac": 5},
	  {"id": 3, "role": "worker", "pid": 2102.5, "vm": {"attached": 1, "vm_name": "g", "gpu": ""}},
	  {"role": "worker"}]}`))
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 0 {
		t.Errorf("errors %v", res.Errors)
	}
	mustHave(t, text,
		"ernic_instances 4", "ernic_vms 1",
		`ernic_instance_up{ernic_id="1",role="unknown",mac=""} 1`,
		`ernic_commands_total{ernic_id="1",role="unknown"} 1290`,
		`ernic_instance_up{ernic_id="2",role="worker",mac=""} 0`,
		`ernic_vm_attached{ernic_id="3",role="worker",vm_name="g"} 1`,
		`ernic_vm_gpu_passthrough{ernic_id="3",role="worker"} 0`,
		`ernic_commands_total{ernic_id="3",role="worker"} 88`,
		`ernic_instance_up{ernic_id="None",role="worker",mac=""} 0`,
		"ernic_orphan_stats_files 1") // 2.stats: its instance's id is the string "2"
	sdktest.Lacks(t, text, `ernic_commands_total{ernic_id="2"`, `ernic_vm_uptime_seconds{ernic_id="3"`)
}

// TestDuplicateIDs: a second entry with an id already listed would repeat
// its series; it is skipped and reported, and the scrape succeeds.
func TestDuplicateIDs(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	edit(t, root, "run/rocm-ernic/instances.json", []byte(`{"instances": [
	  {"id": 1, "role": "manager", "pid": 2101, "mac": "a"},
	  {"id": 1, "role": "worker", "pid": 2102, "mac": "b"}]}`))
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorManifest || !strings.Contains(res.Errors[0].GetMessage(), "listed twice") {
		t.Errorf("errors %v, want one manifest error", res.Errors)
	}
	mustHave(t, text, "ernic_instances 2", `ernic_instance_up{ernic_id="1",role="manager",mac="a"} 1`,
		`ernic_commands_total{ernic_id="1",role="manager"} 1290`)
	sdktest.Lacks(t, text, `role="worker",mac="b"`)
}

// TestStatsFileNames: <stem>.stats with a stem that Python's int() reads;
// the canonical name wins over another spelling of the same id; other
// names are skipped.
func TestStatsFileNames(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	dir := "run/rocm-ernic/"
	two, _ := os.ReadFile(filepath.Join(root, dir, "2.stats"))
	edit(t, root, dir+"01.stats", two) // id 1 spelt differently: 1.stats wins
	edit(t, root, dir+"abc.stats", two)
	edit(t, root, dir+"9.stats", two)  // not in the manifest
	edit(t, root, dir+"09.stats", two) // the same orphan id
	edit(t, root, dir+"3.stats", nil)  // instance 3 without its file
	edit(t, root, dir+"1.sock", []byte{})
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 0 {
		t.Errorf("errors %v", res.Errors)
	}
	mustHave(t, text,
		`ernic_commands_total{ernic_id="1",role="manager"} 1290`,
		"ernic_orphan_stats_files 1",
		`ernic_instance_up{ernic_id="3",role="worker",mac="c2:09:5b:e4:31:7f"} 0`)
	sdktest.Lacks(t, text, `ernic_commands_total{ernic_id="3"`, `ernic_stats_torn_reads_total{ernic_id="3"`)
}

// TestTruncatedFirstRead: a file caught empty or half-written before any
// complete read exports no statistics series (not zeros) and counts the
// torn read; once complete, it is exported.
func TestTruncatedFirstRead(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	one, _ := os.ReadFile(filepath.Join(root, "run/rocm-ernic/1.stats"))
	edit(t, root, "run/rocm-ernic/1.stats", []byte{})
	edit(t, root, "run/rocm-ernic/2.stats", one[:len(one)/2])
	c := sdktest.Client(t, p, opts)
	res := sdktest.Collect(t, c, 0)
	text := res.Text(t)
	if len(res.Errors) != 0 {
		t.Errorf("errors %v", res.Errors)
	}
	mustHave(t, text,
		`ernic_stats_torn_reads_total{ernic_id="1",role="manager"} 1`,
		`ernic_stats_torn_reads_total{ernic_id="2",role="worker"} 1`,
		`ernic_instance_up{ernic_id="1",role="manager",mac="a6:3f:0c:91:5e:27"} 1`)
	sdktest.Lacks(t, text, `ernic_commands_total{ernic_id="1"`, `ernic_commands_total{ernic_id="2"`, `ernic_qp_count{ernic_id="1"`)

	edit(t, root, "run/rocm-ernic/1.stats", one)
	text = sdktest.Collect(t, c, 0).Text(t)
	mustHave(t, text, `ernic_commands_total{ernic_id="1",role="manager"} 1290`,
		`ernic_stats_torn_reads_total{ernic_id="1",role="manager"} 1`)
}

// TestMalformedLines: a complete file with broken lines is exported with
// the original's reading of them (non-integers read 0); a later read that
// breaks a value of the same process is refused as torn.
func TestMalformedLines(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	c := sdktest.Client(t, p, opts)
	sdktest.Collect(t, c, 0)
	one, _ := os.ReadFile(filepath.Join(root, "run/rocm-ernic/1.stats"))
	broken := strings.Replace(string(one), "commands                : 1290", "commands                : 12x90", 1)
	broken = strings.Replace(broken, "total_ip_bytes_tx       : 9182736", "total_ip_bytes_tx       : 99999999999999999999999", 1)
	edit(t, root, "run/rocm-ernic/1.stats", []byte(broken))
	res := sdktest.Collect(t, c, 0)
	if len(res.Errors) != 0 {
		t.Errorf("errors %v", res.Errors)
	}
	mustHave(t, res.Text(t), `ernic_commands_total{ernic_id="1",role="manager"} 1290`,
		`ernic_stats_torn_reads_total{ernic_id="1",role="manager"} 1`)

	// On a first read, the same file exports as the original would.
	p, opts, root = runDirPlugin(t, "testdata/ernic-run.ttar")
	edit(t, root, "run/rocm-ernic/1.stats", []byte(broken))
	text, _ := collectText(t, p, opts)
	mustHave(t, text, `ernic_commands_total{ernic_id="1",role="manager"} 0`,
		`ernic_ip_bytes_tx_total{ernic_id="1",role="manager"} 1e+23`,
		`ernic_ip_bytes_total{ernic_id="1",role="manager"} 1.0000000000000001e+23`)
}

// TestOversizedFiles: a file too large to be a server's is an error naming
// it, not a plugin out of memory.
func TestOversizedFiles(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	one, _ := os.ReadFile(filepath.Join(root, "run/rocm-ernic/1.stats"))
	edit(t, root, "run/rocm-ernic/1.stats", append(one, make([]byte, maxStatsSize)...))
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorStats || !strings.Contains(res.Errors[0].GetMessage(), "1.stats is larger than 8 MiB") {
		t.Errorf("errors %v", res.Errors)
	}
	mustHave(t, text, `ernic_commands_total{ernic_id="2",role="worker"} 644`)
	sdktest.Lacks(t, text, `ernic_commands_total{ernic_id="1"`)
}

func TestLiveness(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	stat, _ := os.ReadFile(filepath.Join(root, "proc/2101/stat"))
	// 2101 a zombie: down. 2102's stat unreadable as a stat file: alive, reported.
	edit(t, root, "proc/2101/stat", []byte(strings.Replace(string(stat), ") S ", ") Z ", 1)))
	edit(t, root, "proc/2102/stat", []byte("2102 (x"))
	text, res := collectText(t, p, opts)
	if len(res.Errors) != 1 || res.Errors[0].GetCollector() != collectorProcfs || !strings.Contains(res.Errors[0].GetMessage(), "2102") {
		t.Errorf("errors %v, want one procfs error naming pid 2102", res.Errors)
	}
	mustHave(t, text,
		`ernic_instance_up{ernic_id="1",role="manager",mac="a6:3f:0c:91:5e:27"} 0`,
		`ernic_instance_up{ernic_id="2",role="worker",mac="3a:d4:77:10:8b:e2"} 1`)
	sdktest.Lacks(t, text, `ernic_instance_uptime_seconds`)
	// Statistics do not depend on liveness (as in the original).
	mustHave(t, text, `ernic_commands_total{ernic_id="1",role="manager"} 1290`)
}

// mustHave fails for each line the exposition lacks as a whole line.
func mustHave(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains("\n"+text, "\n"+l+"\n") {
			t.Errorf("exposition lacks %s", l)
		}
	}
}

// TestServerRestart: a new pid in the manifest is a new server whose
// counters start again: its lower values are exported at once (a real
// reset), not refused as torn; the same pid with lower values is refused.
func TestServerRestart(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	c := sdktest.Client(t, p, opts)
	mustHave(t, sdktest.Collect(t, c, 0).Text(t), `ernic_stats_writes_total{ernic_id="2",role="worker"} 2210`)

	two, _ := os.ReadFile(filepath.Join(root, "run/rocm-ernic/2.stats"))
	restarted := strings.NewReplacer("Write count : 2210", "Write count : 3", "commands                : 644", "commands                : 2").Replace(string(two))
	edit(t, root, "run/rocm-ernic/2.stats", []byte(restarted))
	mustHave(t, sdktest.Collect(t, c, 0).Text(t), `ernic_stats_writes_total{ernic_id="2",role="worker"} 2210`,
		`ernic_stats_torn_reads_total{ernic_id="2",role="worker"} 1`)

	manifest, _ := os.ReadFile(filepath.Join(root, "run/rocm-ernic/instances.json"))
	edit(t, root, "run/rocm-ernic/instances.json", []byte(strings.Replace(string(manifest), `"pid": 2102`, `"pid": 2201`, 1)))
	mustHave(t, sdktest.Collect(t, c, 0).Text(t),
		`ernic_stats_writes_total{ernic_id="2",role="worker"} 3`,
		`ernic_commands_total{ernic_id="2",role="worker"} 2`,
		`ernic_stats_torn_reads_total{ernic_id="2",role="worker"} 1`)
}

// TestVMUptimeFromItsProcess: an attached VM without launched_at (as
// ernicctl attach writes it) gets its uptime from vm_pid's start.
func TestVMUptimeFromItsProcess(t *testing.T) {
	p, opts, root := runDirPlugin(t, "testdata/ernic-run.ttar")
	manifest, _ := os.ReadFile(filepath.Join(root, "run/rocm-ernic/instances.json"))
	edit(t, root, "run/rocm-ernic/instances.json", []byte(strings.Replace(string(manifest), `"launched_at": 1767225600.25,`, "", 1)))
	text, _ := collectText(t, p, opts)
	// uptime 20000.5 s, vm_pid 2201 started at tick 1010000 (10100 s).
	mustHave(t, text, `ernic_vm_uptime_seconds{ernic_id="1",role="manager"} 9900.5`)
}
