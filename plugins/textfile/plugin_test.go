package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// collect scrapes a configured plugin once and returns its exposition
// and its partial errors as one string each.
func collect(t *testing.T, c *sdktest.Conn) (string, string) {
	t.Helper()
	res := sdktest.Collect(t, c, 0)
	if res.Status != nil {
		t.Fatalf("collect: %v", res.Status)
	}
	var errs []string
	for _, e := range res.Errors {
		errs = append(errs, e.GetCollector()+": "+e.GetMessage())
	}
	return res.Text(t), strings.Join(errs, "\n")
}

// TestNCCLInspector: NCCL Inspector's per-GPU files (testdata/nccl-inspector,
// its documented format: no HELP or TYPE, twelve labels) are served as
// untyped families with node_exporter's help, every series once.
func TestNCCLInspector(t *testing.T) {
	dir := dirWith(t, nil)
	ents, _ := os.ReadDir("testdata/nccl-inspector")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".prom") {
			data, err := os.ReadFile(filepath.Join("testdata/nccl-inspector", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, e.Name()), string(data), fixedMtime)
		}
	}
	res := sdktest.Run(t, testPlugin(), opts(dir))
	if len(res.Errors) != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	got := res.Text(t)
	gpu0 := filepath.Join(dir, "nccl_inspector_metrics_GPU-3f2a9c1e-0b7d-4e55-9a61-2c8d7e4f1a01.prom")
	gpu1 := filepath.Join(dir, "nccl_inspector_metrics_GPU-9b41d07c-58e2-4a1f-8c3d-71e0f5a2b6c4.prom")
	sdktest.Contains(t, got,
		"# HELP nccl_bus_bandwidth_gbs Metric read from "+gpu0+", "+gpu1+"\n",
		"# TYPE nccl_bus_bandwidth_gbs untyped\n",
		`nccl_bus_bandwidth_gbs{coll_sn="228924",collective="AllReduce",comm_id="0xd152c00f111816",gpu_device_id="GPU0",hostname="pool0-0002",message_size="2.00GB",n_nodes="2",n_ranks="16",rank="0",slurm_job="llama-pretrain",slurm_job_id="48213",timestamp="2025-10-17T03:31:47Z"} 519.77`+"\n",
		`nccl_collective_exec_time_microseconds{coll_sn="1231",collective="ReduceScatter",comm_id="0x7f8c496ae9f661",gpu_device_id="GPU0",hostname="pool0-0002",message_size="2.00GB",n_nodes="1",n_ranks="8",rank="0",slurm_job="llama-pretrain",slurm_job_id="48213",timestamp="2025-10-17T03:31:47Z"} 41057`+"\n",
		`nccl_algorithm_bandwidth_gbs{coll_sn="228924",collective="AllReduce",comm_id="0xd152c00f111816",gpu_device_id="GPU1",hostname="pool0-0002",message_size="2.00GB",n_nodes="2",n_ranks="16",rank="1",slurm_job="llama-pretrain",slurm_job_id="48213",timestamp="2025-10-17T03:31:47Z"} 276.98`+"\n",
		fmt.Sprintf("textfile_mtime_seconds{file=%q} %s\n", gpu0, fmtFloat(float64(fixedMtime.Unix()))),
		"textfile_scrape_error 0\n",
		"textfile_series 9\n",
	)
	if n := strings.Count(got, "\nnccl_"); n != 9 {
		t.Errorf("%d nccl_ samples, want 9", n)
	}
}

// TestUnsafeFilesRefused: a world-writable file, a symlink out of the
// directory, a FIFO and a file over max_file_bytes are each refused with
// an error naming the file, counted by reason; a symlink to a file beside
// it is followed; the rest of the directory is served.
func TestUnsafeFilesRefused(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.prom")
	writeFile(t, outside, "secret 1\n", fixedMtime)
	dir := dirWith(t, map[string]string{
		"good.prom":   "good 1\n",
		"open.prom":   "open 1\n",
		"big.prom":    "big 1\n# " + strings.Repeat("x", 200) + "\n",
		"target.prom": "target 1\n",
	})
	if err := os.Chmod(filepath.Join(dir, "open.prom"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(dir, "escape.prom"))
	os.Symlink("target.prom", filepath.Join(dir, "alias.prom"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.prom"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts(dir)
	o.Config["max_file_bytes"] = 100
	c := sdktest.Client(t, testPlugin(), o)
	text, errs := collect(t, c)
	sdktest.Contains(t, text, "good 1\n", "target 1\n",
		`textfile_files_refused_total{reason="permissions"} 1`,
		`textfile_files_refused_total{reason="symlink"} 1`,
		`textfile_files_refused_total{reason="not_regular"} 1`,
		`textfile_files_refused_total{reason="size"} 1`,
		`textfile_collection_errors_total{collector="file"} 4`,
		"textfile_scrape_error 1\n")
	sdktest.Lacks(t, text, "open 1", "secret 1", "big 1")
	for _, want := range []string{
		filepath.Join(dir, "open.prom") + ": writable by every user (mode 0666)",
		filepath.Join(dir, "escape.prom") + ": symlink to " + outside + ", outside the directory",
		filepath.Join(dir, "fifo.prom") + ": not a regular file",
		filepath.Join(dir, "big.prom") + ": 209 bytes, more than max_file_bytes (100)",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors lack %q:\n%s", want, errs)
		}
	}
	// The alias is served once: its series are the target's, refused as
	// duplicates of the earlier file.
	sdktest.Contains(t, text, `textfile_series_refused_total{reason="duplicate"} 1`)
}

// TestWorldWritableDirectory: a 777 directory is refused as a whole, with
// a warning at Configure and an error at every scrape that both say how to
// set it up (a group-writable setgid directory).
func TestWorldWritableDirectory(t *testing.T) {
	dir := dirWith(t, map[string]string{"job.prom": "job 1\n"})
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	c := sdktest.Client(t, testPlugin(), opts(dir))
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "chmod 2775 "+dir) {
		t.Errorf("configure warnings %q, want one saying chmod 2775 %s", c.Warnings, dir)
	}
	text, errs := collect(t, c)
	sdktest.Lacks(t, text, "job 1")
	sdktest.Contains(t, text, "textfile_scrape_error 1\n", `textfile_collection_errors_total{collector="directory"} 1`)
	if !strings.Contains(errs, "directory "+dir+" is writable by every user (mode 0777)") || !strings.Contains(errs, "setgid") {
		t.Errorf("errors %q", errs)
	}
	// Fixed: served.
	os.Chmod(dir, 0o2775)
	text, _ = collect(t, c)
	sdktest.Contains(t, text, "job 1\n", "textfile_scrape_error 0\n")
}

// TestIncompleteFileHeldOneScrape: a file caught while being written (no
// trailing newline) serves its last good parse for one scrape, counted
// and without an error; still incomplete at the next scrape it is
// refused; complete, it is served again.
func TestIncompleteFileHeldOneScrape(t *testing.T) {
	dir := dirWith(t, map[string]string{"job.prom": "job_step 1\njob_done 0\n"})
	path := filepath.Join(dir, "job.prom")
	c := sdktest.Client(t, testPlugin(), opts(dir))
	text, _ := collect(t, c)
	sdktest.Contains(t, text, "job_step 1\n", "job_done 0\n")

	writeFile(t, path, "job_step 2\njob_do", fixedMtime.Add(time.Second))
	text, errs := collect(t, c)
	sdktest.Contains(t, text, "job_step 1\n", "job_done 0\n", "textfile_held_total 1\n", "textfile_scrape_error 0\n",
		fmt.Sprintf("textfile_mtime_seconds{file=%q} %s\n", path, fmtFloat(float64(fixedMtime.Unix()))))
	if errs != "" {
		t.Errorf("a held file is no error: %s", errs)
	}

	text, errs = collect(t, c)
	sdktest.Lacks(t, text, "job_step", "job_done", "textfile_mtime_seconds{")
	sdktest.Contains(t, text, "textfile_held_total 1\n", `textfile_files_refused_total{reason="parse"} 1`, "textfile_scrape_error 1\n")
	if !strings.Contains(errs, path+": no newline at the end") {
		t.Errorf("errors %q", errs)
	}

	writeFile(t, path, "job_step 2\njob_done 1\n", fixedMtime.Add(2*time.Second))
	text, _ = collect(t, c)
	sdktest.Contains(t, text, "job_step 2\n", "job_done 1\n", "textfile_scrape_error 0\n")
}

// TestParsedOnlyWhenChanged: unchanged files are not read again; a new
// mtime or size is.
func TestParsedOnlyWhenChanged(t *testing.T) {
	dir := dirWith(t, map[string]string{"a.prom": "a 1\n", "b.prom": "b 1\n"})
	c := sdktest.Client(t, testPlugin(), opts(dir))
	for range 3 {
		text, _ := collect(t, c)
		sdktest.Contains(t, text, "textfile_parses_total 2\n")
	}
	writeFile(t, filepath.Join(dir, "a.prom"), "a 2\n", fixedMtime.Add(time.Second)) // same size, new mtime
	text, _ := collect(t, c)
	sdktest.Contains(t, text, "a 2\n", "textfile_parses_total 3\n")
	writeFile(t, filepath.Join(dir, "b.prom"), "b 10\n", fixedMtime) // same mtime, new size
	text, _ = collect(t, c)
	sdktest.Contains(t, text, "b 10\n", "textfile_parses_total 4\n")
}

// TestMaxAge: a file older than max_age is dropped and counted, not an
// error; its mtime is still exported.
func TestMaxAge(t *testing.T) {
	dir := dirWith(t, map[string]string{"fresh.prom": "fresh 1\n"})
	old := filepath.Join(dir, "old.prom")
	writeFile(t, old, "old 1\n", fixedNow.Add(-2*time.Hour))
	o := opts(dir)
	o.Config["max_age"] = "1h"
	c := sdktest.Client(t, testPlugin(), o)
	text, errs := collect(t, c)
	sdktest.Contains(t, text, "fresh 1\n", `textfile_files_refused_total{reason="max_age"} 1`, "textfile_scrape_error 0\n",
		fmt.Sprintf("textfile_mtime_seconds{file=%q} %s\n", old, fmtFloat(float64(fixedNow.Add(-2*time.Hour).Unix()))))
	sdktest.Lacks(t, text, "old 1")
	if errs != "" {
		t.Errorf("errors %q", errs)
	}
}

// TestSeriesCaps: families past max_series_per_file and past max_series
// are refused, counted and reported; the others are served.
func TestSeriesCaps(t *testing.T) {
	dir := dirWith(t, map[string]string{
		"a.prom": "a_one 1\na_two{x=\"1\"} 1\na_two{x=\"2\"} 1\na_two{x=\"3\"} 1\n", // 4 series: a_two is past 3
		"b.prom": "b_one 1\nb_two 1\n",
		"c.prom": "c_one{x=\"1\"} 1\nc_one{x=\"2\"} 1\n", // past the total of 4
	})
	o := opts(dir)
	o.Config["max_series_per_file"] = 3
	o.Config["max_series"] = 4
	c := sdktest.Client(t, testPlugin(), o)
	text, errs := collect(t, c)
	sdktest.Contains(t, text, "a_one 1\n", "b_one 1\n", "b_two 1\n", "textfile_series 3\n",
		`textfile_series_refused_total{reason="file_limit"} 3`,
		`textfile_series_refused_total{reason="total_limit"} 2`,
		`textfile_collection_errors_total{collector="merge"} 2`)
	sdktest.Lacks(t, text, "a_two", "c_one")
	for _, want := range []string{"a.prom: family a_two (3 series) is past max_series_per_file (3)", "c.prom: family c_one (2 series) is past max_series (4)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors lack %q:\n%s", want, errs)
		}
	}
}

// TestConflictsBetweenFiles: the first file keeps a family's type and
// help and each series; a later file's family of another type, help or
// colliding series names, and its repeated series, are refused and
// counted — and the scrape serves everything else, the host's guard
// dropping nothing (sdktest fails the test for any drop).
func TestConflictsBetweenFiles(t *testing.T) {
	dir := dirWith(t, map[string]string{
		"a.prom": "# HELP jobs Jobs.\n# TYPE jobs gauge\njobs{q=\"a\"} 1\n# TYPE lat histogram\nlat_bucket{le=\"1\"} 1\nlat_bucket{le=\"+Inf\"} 2\nlat_sum 3\nlat_count 2\nshared{f=\"x\"} 1\n",
		"b.prom": "# TYPE jobs counter\njobs{q=\"b\"} 2\n",
		"c.prom": "# HELP jobs Other.\n# TYPE jobs gauge\njobs{q=\"c\"} 3\n",
		"d.prom": "lat_count 5\nshared{f=\"x\"} 9\nshared{f=\"y\"} 2\nprocess_open_fds 3\n",
	})
	res := sdktest.Run(t, testPlugin(), opts(dir))
	text := res.Text(t)
	sdktest.Contains(t, text, `jobs{q="a"} 1`, `shared{f="x"} 1`, `shared{f="y"} 2`, "lat_count 2\n",
		`textfile_series_refused_total{reason="conflict"} 3`,
		`textfile_series_refused_total{reason="duplicate"} 1`,
		`textfile_series_refused_total{reason="reserved"} 1`,
		"textfile_scrape_error 1\n")
	sdktest.Lacks(t, text, `q="b"`, `q="c"`, "lat_count 5", `shared{f="x"} 9`, "process_open_fds")
	var errs []string
	for _, e := range res.Errors {
		errs = append(errs, e.GetMessage())
	}
	all := strings.Join(errs, "\n")
	for _, want := range []string{
		"b.prom: family jobs is a counter, but " + filepath.Join(dir, "a.prom") + " has it as a gauge first",
		`c.prom: family jobs has help "Other.", but ` + filepath.Join(dir, "a.prom") + ` has "Jobs." first`,
		"d.prom: family lat_count (untyped) would expose lat_count, a series name of family lat",
		"d.prom: family shared: 1 series already exposed by an earlier file",
		"d.prom: family process_open_fds: the prefix process_ is reserved",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
}

// TestOpenMetrics: a file that ends in "# EOF" is parsed as OpenMetrics
// (a counter family with _total samples, a unit line, an exemplar, which
// the text format's parser refuses); its timestamps are refused like the
// text format's.
func TestOpenMetrics(t *testing.T) {
	dir := dirWith(t, map[string]string{
		"om.prom": "# TYPE steps counter\n# UNIT steps \n# HELP steps Steps done.\nsteps_total{job=\"1\"} 12 # {trace_id=\"4bf92f35\"} 1\n# EOF\n",
	})
	res := sdktest.Run(t, testPlugin(), opts(dir))
	text := res.Text(t)
	sdktest.Contains(t, text, `steps_total{job="1"} 12`, "textfile_scrape_error 0\n")
	if len(res.Errors) != 0 {
		t.Errorf("errors %v", res.Errors)
	}
	writeFile(t, filepath.Join(dir, "om.prom"), "# TYPE steps counter\nsteps_total 12 1767225600\n# EOF\n", fixedMtime)
	res = sdktest.Run(t, testPlugin(), opts(dir))
	sdktest.Contains(t, res.Text(t), `textfile_files_refused_total{reason="timestamp"} 1`)
}
