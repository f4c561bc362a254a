package nfsvolume

import "testing"

func TestName(t *testing.T) {
	for _, c := range []struct{ expr, export, want string }{
		{DefaultRegex, "/vol/x", "x"},
		{DefaultRegex, "/vol/x//", "x"},
		{DefaultRegex, "/", "/"}, // captures nothing: the export path
		{`^/export/(?P<volume_id>[a-z]+)$`, "/export/home", "home"},
		{`^/export/(?P<volume_id>[a-z]+)$`, "/other/x", "/other/x"}, // no match
		{`^/(a)/(?P<volume_id>b)$`, "/a/b", "b"},                    // the named group before group 1
		{`^/proj/[a-z]+$`, "/proj/x", "/proj/x"},                    // no group: the whole match
	} {
		n, err := New(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Name(c.export); got != c.want {
			t.Errorf("%q on %q: %q, want %q", c.expr, c.export, got, c.want)
		}
	}
}

func TestNewRefusesBadExpression(t *testing.T) {
	if _, err := New("("); err == nil {
		t.Fatal("no error for an unbalanced expression")
	}
}
