// Package nfsvolume derives an NFS volume's volume_id from its export path,
// the same way in every plugin that labels NFS volumes (nfs's
// volume_id_regex, ebpf's nfs_volume_id_regex), so that the two plugins'
// series of one volume join.
package nfsvolume

import "regexp"

// DefaultRegex is the default expression: the export path's last element.
const DefaultRegex = `([^/]+)/*$`

// Namer derives volume_id from an export path with a regular expression.
type Namer struct {
	re *regexp.Regexp
	// group is the capture group used: the one named volume_id, else 1,
	// else 0 (the whole match).
	group int
}

// New compiles expr; its error is the regexp package's, for the caller to
// prefix with its configuration key.
func New(expr string) (*Namer, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	g := 0
	if i := re.SubexpIndex("volume_id"); i > 0 {
		g = i
	} else if re.NumSubexp() >= 1 {
		g = 1
	}
	return &Namer{re: re, group: g}, nil
}

// Name returns the volume_id of an export path: the group named volume_id,
// else the first group, else the whole match; the export path itself when
// the expression does not match or captures nothing.
func (n *Namer) Name(export string) string {
	m := n.re.FindStringSubmatch(export)
	if m == nil || m[n.group] == "" {
		return export
	}
	return m[n.group]
}
