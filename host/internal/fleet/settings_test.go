package fleet

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/config"
	"github.com/plexporter/plexporter/host/internal/manifest"
	"github.com/plexporter/plexporter/host/internal/supervise"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

func TestCompose(t *testing.T) {
	defaults := supervise.Settings{
		Timeout: 5 * time.Second, StartTimeout: 10 * time.Second, MaxSeries: 100000,
		Enabled: []string{"rdma_*"}, Paths: &pluginv1.Paths{Sysfs: "/host/sys"},
		PassEnv: []string{"LEAK"}, // never inherited: the manifest decides
	}
	loc := config.Location{File: "/etc/plexporter.yml", Key: "plugins.rdma.config", Line: 9}
	section, _ := structpb.NewStruct(map[string]any{"exclude_devices": []any{"mlx5_3"}})
	pin, otherPin := strings.Repeat("ab", 32), strings.Repeat("cd", 32)

	// want starts from defaults with nothing of the host's environment
	// passed, the empty manifest merged and the location set; each case
	// edits that.
	base := func(edit func(*supervise.Settings)) supervise.Settings {
		s := defaults
		s.PassEnv, s.Manifest, s.ConfigLocation = nil, &manifest.Manifest{}, loc
		if edit != nil {
			edit(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		pc       config.Plugin
		manifest manifest.Manifest
		want     supervise.Settings
		err      string
	}{
		{name: "defaults only", want: base(nil)},
		{
			name: "config file overrides timeout, series cap and prefix",
			pc:   config.Plugin{Timeout: 3 * time.Second, MaxSeries: 20, MetricPrefix: "crusoe_vm_"},
			want: base(func(s *supervise.Settings) { s.Timeout, s.MaxSeries, s.MetricPrefix = 3*time.Second, 20, "crusoe_vm_" }),
		},
		{
			name: "the plugin's own section passes through",
			pc:   config.Plugin{Config: map[string]any{"exclude_devices": []any{"mlx5_3"}}},
			want: base(func(s *supervise.Settings) { s.Config = section }),
		},
		{
			name:     "manifest env names the host variables passed on",
			manifest: manifest.Manifest{Env: []string{"HTTPS_PROXY", "TZ"}},
			want: base(func(s *supervise.Settings) {
				s.PassEnv = []string{"HTTPS_PROXY", "TZ"}
				s.Manifest = &manifest.Manifest{Env: []string{"HTTPS_PROXY", "TZ"}}
			}),
		},
		{
			name:     "manifest pin",
			manifest: manifest.Manifest{SHA256: pin},
			want:     base(func(s *supervise.Settings) { s.SHA256, s.Manifest = pin, &manifest.Manifest{SHA256: pin} }),
		},
		{
			name:     "the config file's manifest override wins field by field",
			manifest: manifest.Manifest{SHA256: pin, Env: []string{"HOME"}, User: "rdma"},
			pc:       config.Plugin{Manifest: &manifest.Manifest{SHA256: otherPin, Env: []string{"HTTPS_PROXY"}}},
			want: base(func(s *supervise.Settings) {
				s.SHA256, s.PassEnv = otherPin, []string{"HTTPS_PROXY"}
				s.Manifest = &manifest.Manifest{SHA256: otherPin, Env: []string{"HTTPS_PROXY"}, User: "rdma"}
			}),
		},
		{
			name: "a section structpb cannot carry",
			pc:   config.Plugin{Config: map[string]any{"x": struct{}{}}},
			err:  "invalid type",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.manifest
			got, err := compose(defaults, tc.pc, loc, &m)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) || !proto.Equal(got.Config, tc.want.Config) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(got.Manifest, tc.want.Manifest) || got.ConfigLocation != loc {
				t.Errorf("manifest %+v location %v, want %+v %v", got.Manifest, got.ConfigLocation, tc.want.Manifest, loc)
			}
		})
	}
	if defaults.PassEnv[0] != "LEAK" || defaults.Timeout != 5*time.Second {
		t.Error("compose changed the defaults it was given")
	}
}
