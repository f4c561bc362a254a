package supervise

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/host/internal/discover"
)

func TestSettingsEqualIgnoresProtoCaches(t *testing.T) {
	cfg := func() *structpb.Struct {
		s, _ := structpb.NewStruct(map[string]any{"series": 1.0, "devices": []any{"a"}})
		return s
	}
	a := Settings{Timeout: time.Second, Config: cfg(), Enabled: []string{"x_*"}}
	if _, err := proto.Marshal(a.Config); err != nil { // fills the message's size cache
		t.Fatal(err)
	}
	b := Settings{Timeout: time.Second, Config: cfg(), Enabled: []string{"x_*"}}
	if !a.Equal(b) {
		t.Fatal("identical settings compare unequal after marshalling (every rescan would restart the plugin)")
	}
	b.Config.Fields["series"] = structpb.NewNumberValue(2)
	if a.Equal(b) {
		t.Fatal("a config change must be seen")
	}
	b = Settings{Timeout: 2 * time.Second, Config: cfg(), Enabled: []string{"x_*"}}
	if a.Equal(b) {
		t.Fatal("a timeout change must be seen")
	}
	// a running supervisor holds its settings with defaults filled in
	running := New(discoverPlugin(), a, slog.New(slog.DiscardHandler)).Settings()
	if !running.Equal(Settings{Timeout: time.Second, Config: cfg(), Enabled: []string{"x_*"}}) {
		t.Fatal("defaults applied by New make unchanged settings look changed")
	}
}

func discoverPlugin() discover.Plugin { return discover.Plugin{Name: "x", Path: "/x", Target: "/x"} }
