// Command demo lays out the node `make demo` serves: one sysfs and procfs
// built from every shipped plugin's fixtures (package demotree) and the
// demo's config file. It prints the host flags that point at them.
//
//	go run ./internal/dev/demo -dir bin/demo
//	plexporter --plugin.dir=... $(cat bin/demo/flags)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexporter/plexporter/internal/dev/demo/demotree"
)

func main() {
	dir := flag.String("dir", "bin/demo", "directory to build the node in: <dir>/node/{sys,proc}, <dir>/plexporter.yml; its node/ is replaced")
	repo := flag.String("repo", ".", "module root, where plugins/*/testdata are")
	library := flag.String("library", "", "the example C collector built as a shared object (make collectors), for the so plugin to load; empty: so loads nothing")
	flag.Parse()
	if err := run(*dir, *repo, *library); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(dir, repo, library string) error {
	dir, err := filepath.Abs(dir) // the host's roots must be absolute: manifests grant paths under them
	if err != nil {
		return err
	}
	if library != "" {
		if library, err = filepath.Abs(library); err != nil {
			return err
		}
	}
	node := filepath.Join(dir, "node")
	if err := os.RemoveAll(node); err != nil {
		return err
	}
	tree, err := demotree.Build(repo, node)
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "plexporter.yml")
	if err := os.WriteFile(cfg, []byte(tree.Config(library)), 0o644); err != nil {
		return err
	}
	flags := strings.Join([]string{"--path.sysfs=" + tree.Sysfs, "--path.procfs=" + tree.Procfs, "--config.file=" + cfg}, " ")
	if err := os.WriteFile(filepath.Join(dir, "flags"), []byte(flags+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Println(flags)
	return nil
}
