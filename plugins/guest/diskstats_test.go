package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/procfs/blockdevice"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

// TestDiskstatsAgreesWithProcfs: on every fixture prometheus/procfs reads
// whole, the line-by-line parser gives what procfs gives, field for field
// (IoStatsCount included).
func TestDiskstatsAgreesWithProcfs(t *testing.T) {
	for _, archive := range []string{"vm", "oldkernel-nopsi", "demo"} {
		root := sdktest.Unpack(t, filepath.Join("testdata", archive+".ttar"))
		fs, err := blockdevice.NewFS(root+"/proc", root+"/sys")
		if err != nil {
			t.Fatal(err)
		}
		want, err := fs.ProcDiskstats()
		if err != nil {
			t.Fatalf("%s: procfs: %v", archive, err)
		}
		path := root + "/proc/diskstats"
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, bad, err := parseDiskstats(strings.NewReader(string(data)), path)
		if err != nil || len(bad) != 0 {
			t.Fatalf("%s: %v %v", archive, err, bad)
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", archive, got, want)
		}
	}
}

// TestDiskstatsLine: numbers a later kernel appends are ignored; a field
// that is not a number, or one out of range, fails the line.
func TestDiskstatsLine(t *testing.T) {
	d, err := parseDiskstatsLine(strings.Fields(" 259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 99 98"))
	if err != nil || d.IoStatsCount != 20 || d.FlushRequestsCompleted != 16 || d.TimeSpentFlushing != 17 || d.DeviceName != "nvme0n1" {
		t.Errorf("22 fields: %+v, %v", d, err)
	}
	for _, line := range []string{
		"259 0 nvme0n1 1 2 3 4 5 6 7 8 9 -10 11",
		"259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 x",
		"4294967296 0 sda 1 2 3 4 5 6 7 8 9 10 11",
		"259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10",
	} {
		if _, err := parseDiskstatsLine(strings.Fields(line)); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
}
