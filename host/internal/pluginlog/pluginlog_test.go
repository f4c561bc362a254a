package pluginlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLevelsArgsAndNames(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4})).With("plugin", "rdma")
	l := New(base, hclog.Info)

	l.Debug("hidden below the level")
	l.With("device", "mlx5_0").Warn("counter unreadable", "file", "port_rcv_data")
	l.Named("plexporter-rdma").Error("odd args", "dangling")
	out := buf.String()

	if strings.Contains(out, "hidden") {
		t.Errorf("debug line logged at info level:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="counter unreadable" plugin=rdma device=mlx5_0 file=port_rcv_data`,
		`level=ERROR msg="odd args" plugin=rdma extra=dangling`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if !l.IsInfo() || l.IsDebug() {
		t.Error("level predicates wrong")
	}
	l.SetLevel(hclog.Trace)
	l.Trace("now visible")
	if !strings.Contains(buf.String(), "now visible") {
		t.Error("SetLevel did not take effect")
	}
}
