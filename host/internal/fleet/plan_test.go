package fleet

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/supervise"
)

// TestPlan: what a reconcile does to each plugin, from what runs and what
// the disk and config file want.
func TestPlan(t *testing.T) {
	cfg := func(v string) supervise.Settings {
		c, err := structpb.NewStruct(map[string]any{"key": v})
		if err != nil {
			t.Fatal(err)
		}
		return supervise.Settings{Timeout: 5 * time.Second, Config: c, Manifest: &manifest.Manifest{User: "nobody"}}
	}
	base := cfg("a")
	otherManifest := cfg("a")
	otherManifest.Manifest = &manifest.Manifest{User: "nobody", Capabilities: []string{"CAP_NET_ADMIN"}}
	// A section moving down a line is no change (Settings.Equal).
	moved := cfg("a")
	moved.ConfigLocation.Line = 42

	want := func(name, identity string, s supervise.Settings) wanted {
		return wanted{plugin: discover.Plugin{Name: name, Path: "/p/plexporter-" + name, Identity: identity}, settings: s}
	}
	up := func(identity string, s supervise.Settings) instance {
		return instance{identity: identity, settings: s, running: true}
	}
	down := func(identity string, s supervise.Settings) instance {
		return instance{identity: identity, settings: s}
	}
	rejected := func(in instance, identity string, s supervise.Settings) instance {
		in.rejected = &rejection{identity: identity, settings: s, message: "bad key"}
		return in
	}

	for _, c := range []struct {
		name    string
		current map[string]instance
		want    map[string]wanted
		plan    []string // step name [why]
	}{
		{name: "nothing", plan: nil},
		{
			name: "new plugin: start",
			want: map[string]wanted{"a": want("a", "i1", base)},
			plan: []string{"start a"},
		},
		{
			name:    "removed, refused or disabled on this scan (not wanted): stop",
			current: map[string]instance{"a": up("i1", base), "b": down("i1", base)},
			plan:    []string{"stop a", "stop b"},
		},
		{
			name:    "removed after a rejection: stop (and the rejection is forgotten)",
			current: map[string]instance{"a": rejected(up("i1", base), "i1", cfg("b"))},
			plan:    []string{"stop a"},
		},
		{
			name:    "unchanged: nothing",
			current: map[string]instance{"a": up("i1", base), "b": down("i1", base)},
			want:    map[string]wanted{"a": want("a", "i1", base), "b": want("b", "i1", moved)},
			plan:    nil,
		},
		{
			name:    "binary replaced while running: try the new beside it",
			current: map[string]instance{"a": up("i1", base)},
			want:    map[string]wanted{"a": want("a", "i2", base)},
			plan:    []string{"try a " + whyBinary},
		},
		{
			name:    "config changed while running: try",
			current: map[string]instance{"a": up("i1", base)},
			want:    map[string]wanted{"a": want("a", "i1", cfg("b"))},
			plan:    []string{"try a " + whySettings},
		},
		{
			name:    "manifest changed while running: try",
			current: map[string]instance{"a": up("i1", base)},
			want:    map[string]wanted{"a": want("a", "i1", otherManifest)},
			plan:    []string{"try a " + whySettings},
		},
		{
			name:    "binary replaced while not running: restart",
			current: map[string]instance{"a": down("i1", base)},
			want:    map[string]wanted{"a": want("a", "i2", base)},
			plan:    []string{"restart a " + whyBinary},
		},
		{
			name:    "config changed while not running: restart",
			current: map[string]instance{"a": down("i1", base)},
			want:    map[string]wanted{"a": want("a", "i1", cfg("b"))},
			plan:    []string{"restart a " + whySettings},
		},
		{
			name:    "the settings it rejected already: nothing until they change",
			current: map[string]instance{"a": rejected(up("i1", base), "i1", cfg("b"))},
			want:    map[string]wanted{"a": want("a", "i1", cfg("b"))},
			plan:    nil,
		},
		{
			name:    "other settings after a rejection: try them",
			current: map[string]instance{"a": rejected(up("i1", base), "i1", cfg("b"))},
			want:    map[string]wanted{"a": want("a", "i1", cfg("c"))},
			plan:    []string{"try a " + whySettings},
		},
		{
			name:    "the rejected settings with a new binary: try them",
			current: map[string]instance{"a": rejected(up("i1", base), "i1", cfg("b"))},
			want:    map[string]wanted{"a": want("a", "i2", cfg("b"))},
			plan:    []string{"try a " + whyBinary},
		},
		{
			name:    "back to the settings it runs with after a rejection: forget the rejection",
			current: map[string]instance{"a": rejected(up("i1", base), "i1", cfg("b"))},
			want:    map[string]wanted{"a": want("a", "i1", base)},
			plan:    []string{"forget a"},
		},
		{
			name: "all at once, sorted by name",
			current: map[string]instance{
				"gone": up("i1", base), "same": up("i1", base), "swap": up("i1", base), "dead": down("i1", base),
			},
			want: map[string]wanted{
				"same": want("same", "i1", base), "swap": want("swap", "i2", base),
				"dead": want("dead", "i1", cfg("b")), "added": want("added", "i1", base),
			},
			plan: []string{"start added", "restart dead " + whySettings, "stop gone", "try swap " + whyBinary},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, a := range plan(c.current, c.want) {
				s := fmt.Sprintf("%s %s", a.step, a.name)
				if a.why != "" {
					s += " " + a.why
				}
				got = append(got, s)
				if a.step == stepStart || a.step == stepRestart || a.step == stepTry {
					if w := c.want[a.name]; a.want.plugin != w.plugin || !a.want.settings.Equal(w.settings) {
						t.Errorf("%s: runs %+v, want %+v", s, a.want.plugin, w.plugin)
					}
				}
			}
			if !slices.Equal(got, c.plan) {
				t.Errorf("plan:\n got %q\nwant %q", got, c.plan)
			}
		})
	}
}
