//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexporter/plexporter/sdk/sdktest"
)

func fixtureConfig(dir string) map[string]any {
	return map[string]any{"telemetry_dirs": []any{dir}, "hostname": "node-a"}
}

// TestFixtureValues: one drain of each fixture ring yields every value of
// EXPECTED.md's sample list (compared as numbers, the hostname label
// aside), the positions after the drain are the expected ones and nothing
// but read_pos changed in the files.
func TestFixtureValues(t *testing.T) {
	for name, sum := range pristine {
		data, err := os.ReadFile(filepath.Join("testdata/telemetry_dir", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Fatalf("testdata/telemetry_dir/%s is not the pristine fixture", name)
		}
	}
	dir := copyFixture(t)
	c := sdktest.Client(t, newPlugin(), sdktest.Options{Config: fixtureConfig(dir)})
	res := sdktest.Collect(t, c, 0)
	if len(res.Errors) != 0 {
		t.Fatalf("partial errors: %v", res.Errors)
	}
	text := collectText(t, res)

	got := samples(t, strings.NewReader(text), "hostname")
	f, err := os.Open("testdata/expected-samples.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := samples(t, f)
	if len(want) != 207 {
		t.Fatalf("expected-samples.txt has %d samples, EXPECTED.md says 207", len(want))
	}
	wantValues(t, got, want)
	wantValues(t, got, map[string]float64{
		// the full ring is reported, the others are not
		`nixl_buffer_full_total{agent_name="kvbm-worker-0"}`:                            1,
		`nixl_buffer_full_total{agent_name="decode-tp1"}`:                               0,
		`nixl_buffer_full_total{agent_name="` + wrapped + `"}`:                          0,
		`nixl_buffer_unread_events{agent_name="kvbm-worker-0"}`:                         63,
		`nixl_buffer_unread_events{agent_name="decode-tp1"}`:                            0,
		`nixl_buffer_unread_events{agent_name="` + wrapped + `"}`:                       280,
		`nixl_buffer_capacity_events{agent_name="` + wrapped + `"}`:                     512,
		`nixl_reader_errors_total{agent_name="` + wrapped + `",reason="unknown_event"}`: 0,
		`nixl_agents{}`: 3,
	})
	if !strings.Contains(text, `agent_tx_bytes_total{hostname="node-a",agent_name="kvbm-worker-0"} 1.47456e+07`) {
		t.Errorf("the hostname label is not the configured one:\n%s", text)
	}

	// After the drain only read_pos (bytes 8-15) differs, and it is
	// write_pos.
	for name, wantRead := range map[string]uint64{wrapped: 188, "decode-tp1": 0, "kvbm-worker-0": 63} {
		orig, _ := os.ReadFile(filepath.Join("testdata/telemetry_dir", name))
		now, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint64(now[8:]); got != wantRead {
			t.Errorf("%s: read_pos %d after the drain, want %d", name, got, wantRead)
		}
		if !bytes.Equal(orig[:8], now[:8]) || !bytes.Equal(orig[16:], now[16:]) {
			t.Errorf("%s: the drain changed bytes other than read_pos", name)
		}
	}

	// Draining consumed the events: a second and a third scrape with no
	// new events report the same values; only the unread high-water mark
	// is back to 0, since no drain found anything waiting.
	for i := 0; i < 2; i++ {
		again := samples(t, strings.NewReader(collectText(t, sdktest.Collect(t, c, 0))), "hostname")
		for k, v := range got {
			if strings.HasPrefix(k, "nixl_buffer_unread_events{") {
				v = 0
			}
			if again[k] != v {
				t.Errorf("scrape %d: %s = %v, the first scrape had %v", i+2, k, again[k], got[k])
			}
		}
		if len(again) != len(got) {
			t.Errorf("scrape %d has %d samples, the first %d", i+2, len(again), len(got))
		}
	}
	sdktest.Golden(t, text, "testdata/telemetry_dir.golden")
	sdktest.PromtoolClean(t, text, promtoolExceptions)
}

// promtoolExceptions are the names promtool objects to that stay: NIXL's
// own histogram names, kept for dashboard parity (README.md).
var promtoolExceptions = map[string]string{
	"agent_xfer_post_time_us": "NIXL's telemetry name: should not contain abbreviated units",
	"agent_xfer_time_us":      "NIXL's telemetry name: should not contain abbreviated units",
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
	}
	return strings.Join(out, "\n")
}
