package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

func TestReadMappingFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, data string
		want       []string
		err        string
	}{
		{"one", "4242\n", []string{"4242"}, ""},
		{"shared", "4242\n4243\n4242\n", []string{"4242", "4243"}, ""},
		{"array and het", "100_3\n200+1\n", []string{"100_3", "200+1"}, ""},
		{"blank lines and spaces", "\n  77 \r\n\n", []string{"77"}, ""},
		// The epilog truncated it; the prolog is writing the next id.
		{"empty", "", nil, ""},
		{"last line without newline", "4242\n42", []string{"4242"}, ""},
		{"only a partial line", "424", nil, ""},
		{"garbage", "4242\nrm -rf /\n", []string{"4242"}, "mapping:2: \"rm -rf /\" is not a Slurm job id"},
	} {
		path := filepath.Join(dir, "mapping")
		writeFile(t, path, tc.data)
		got, err := readMappingFile(path)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: ids %q, want %q", tc.name, got, tc.want)
		}
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
	writeFile(t, filepath.Join(dir, "big"), strings.Repeat("1\n", maxMappingFile))
	if _, err := readMappingFile(filepath.Join(dir, "big")); err == nil || !strings.Contains(err.Error(), "not a job-mapping file") {
		t.Errorf("a file over %d bytes: %v", maxMappingFile, err)
	}
	var many strings.Builder
	for i := range maxJobIDsPerFile + 1 {
		fmt.Fprintf(&many, "%d\n", i)
	}
	writeFile(t, filepath.Join(dir, "many"), many.String())
	if ids, err := readMappingFile(filepath.Join(dir, "many")); len(ids) != maxJobIDsPerFile || err == nil {
		t.Errorf("%d ids, error %v, want %d and an error", len(ids), err, maxJobIDsPerFile)
	}
}

// TestJobMappingDir: the series of a directory as prolog scripts leave
// it, under the rootfs; dot files (a script's temporary) and directories
// are skipped; a missing directory is no series and no error.
func TestJobMappingDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "var/lib/plexporter/job-mapping")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "mlx5_2"), "4242\n4243\n")
	writeFile(t, filepath.Join(dir, "nvme0"), "4242\n")
	writeFile(t, filepath.Join(dir, "0000:3b:00.2"), "7\n")
	writeFile(t, filepath.Join(dir, ".mlx5_3.tmp"), "9\n")
	opts := sdktest.Options{Sysfs: t.TempDir(), Rootfs: root, Config: map[string]any{"pod_resources_socket": "", "job_mapping_dir": "/var/lib/plexporter/job-mapping"}}
	text := sdktest.CleanGolden(t, sdktest.Run(t, newPlugin(), opts), "testdata/jobs.golden")
	sdktest.Lacks(t, text, `device=".mlx5_3.tmp"`, `device="sub"`, "device_pod_info", `collector="pod_resources"`)
	sdktest.Promtool(t, text)

	opts.Config["job_mapping_dir"] = "/nonexistent"
	text = sdktest.CleanGolden(t, sdktest.Run(t, newPlugin(), opts), "testdata/jobs-none.golden")
	sdktest.Lacks(t, text, "device_job_info")
}

// TestJobMappingRewrittenWhileScraping: prolog and epilog scripts
// rewrite the files (truncate, then write, as `echo id > file` does) and
// add and remove them while the plugin reads: no scrape may see a job id
// that was never written whole.
func TestJobMappingRewrittenWhileScraping(t *testing.T) {
	dir := t.TempDir()
	ids := []string{"1234567", "7654321", "1111111_22"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			path := filepath.Join(dir, fmt.Sprintf("mlx5_%d", i%3))
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Error(err)
				return
			}
			// Byte by byte, the worst a writer can do.
			for _, b := range []byte(ids[i%len(ids)] + "\n") {
				f.Write([]byte{b})
			}
			f.Close()
			if i%7 == 0 {
				os.Remove(path)
			}
		}
	})
	// Stopped before t.TempDir's cleanup removes the directory, also when
	// the test fails.
	t.Cleanup(func() { close(stop); wg.Wait() })
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Sysfs: t.TempDir(), Rootfs: "/", Config: map[string]any{"pod_resources_socket": "", "job_mapping_dir": dir}})
	seen := 0
	for range 300 {
		res := sdktest.Collect(t, c, 0)
		if len(res.Errors) != 0 {
			t.Fatalf("errors %v", res.Errors)
		}
		for _, line := range strings.Split(res.Text(t), "\n") {
			if !strings.HasPrefix(line, "device_job_info{") {
				continue
			}
			seen++
			if !slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(line, `job_id="`+id+`"`) }) {
				t.Fatalf("a half-written job id: %s", line)
			}
		}
	}
	if seen == 0 {
		t.Error("no job series in 300 scrapes: the test did not race the writer")
	}
}
