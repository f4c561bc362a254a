package guesterrors

import "testing"

// TestShared: the family is declared shared, or the host would drop the
// series of whichever of guest and probe comes second by name.
func TestShared(t *testing.T) {
	d := Desc()
	if d.Name != Name || !d.Shared || len(d.Labels) != 1 || d.Labels[0] != "collector" {
		t.Errorf("descriptor %+v", d)
	}
	if Desc() == d {
		t.Error("Desc returns one descriptor to both callers")
	}
}
