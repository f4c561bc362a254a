// Command ttar creates and extracts the text archives that hold the
// plugins' sysfs and procfs fixture trees (the format of prometheus/procfs's
// ttar script; see sdk/fixture). To change a fixture, extract it, edit the
// tree, and create the archive again from the same directory:
//
//	go run ./internal/dev/ttar -C /tmp/t -x -f plugins/rdma/testdata/sysfs.ttar
//	$EDITOR /tmp/t/sys/class/infiniband/mlx5_0/ports/1/state
//	go run ./internal/dev/ttar -C /tmp/t -c -f plugins/rdma/testdata/sysfs.ttar sys
//
// A tar fixture is converted by unpacking it and creating the archive:
//
//	mkdir /tmp/t && tar -C /tmp/t -xf testdata/sysfs.tar
//	go run ./internal/dev/ttar -C /tmp/t -c -f testdata/sysfs.ttar sys
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexporter/plexporter/sdk/fixture"
)

func main() {
	create := flag.Bool("c", false, "create the archive from the given paths (relative to -C)")
	extract := flag.Bool("x", false, "extract the archive into -C")
	archive := flag.String("f", "", "the archive file")
	dir := flag.String("C", ".", "the directory the archive's paths are relative to")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: ttar [-C dir] -c -f archive.ttar path...\n       ttar [-C dir] -x -f archive.ttar\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*create, *extract, *archive, *dir, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "ttar:", err)
		os.Exit(1)
	}
}

func run(create, extract bool, archive, dir string, paths []string) error {
	switch {
	case archive == "" || create == extract:
		flag.Usage()
		return fmt.Errorf("want exactly one of -c and -x, and -f")
	case extract:
		if len(paths) > 0 {
			return fmt.Errorf("-x takes no paths, got %v", paths)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return fixture.Unpack(archive, dir)
	}
	if len(paths) == 0 {
		return fmt.Errorf("-c needs the paths to archive")
	}
	// The archive is written whole or not at all, so a failed run never
	// leaves half a fixture behind.
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Archive created by ttar -c -f %s %s\n", filepath.Base(archive), strings.Join(paths, " "))
	if err := fixture.WriteTTAR(&b, dir, paths...); err != nil {
		return err
	}
	return os.WriteFile(archive, b.Bytes(), 0o644)
}
