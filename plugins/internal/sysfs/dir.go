package sysfs

import (
	"errors"
	"io/fs"
	"os"
)

// Names lists the entries of a sysfs directory in name order. A missing
// directory is no entries and no error: class directories (class/nvme,
// class/infiniband) exist only while their driver or subsystem is loaded.
func Names(dir string) ([]string, error) {
	entries, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name()) // os.ReadDir sorts by name
	}
	return names, nil
}

// Entry is a numbered directory entry: Name is the prefix followed by Num.
type Entry struct {
	Name string // "nvme10", or "10" for an empty prefix
	Num  int
}

// Numbered lists the entries of dir whose name is prefix followed by a
// decimal number as the kernel prints it ("nvme7", or "7" with an empty
// prefix; not "07", "+7" or "-1"), in numeric order: 2 before 10, which
// name order gets wrong. Other entries are skipped. A missing directory is
// no entries and no error, as with Names.
func Numbered(dir, prefix string) ([]Entry, error) {
	entries, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return numbered(names, prefix), nil
}

// readDir is os.ReadDir with a missing directory as (nil, nil).
func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return entries, err
}
