package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexporter/plexporter/host/internal/trust"
)

func TestPushSection(t *testing.T) {
	path := writeFile(t, `push:
  url: https://mimir.example/api/v1/push
  interval: 30s
  external_labels: {cluster: a}
  headers: {X-Scope-OrgID: team-a}
  max_pending_samples: 1000
  protocol: prometheus.remote_write.v2
  basic_auth: {username: u, password_file: secret}
  tls_config: {ca_file: ca.pem, insecure_skip_verify: false}
`)
	f, err := Load(path, trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Push
	if p == nil || p.URL != "https://mimir.example/api/v1/push" || p.Interval != 30*time.Second || p.ExternalLabels["cluster"] != "a" || p.Headers["X-Scope-OrgID"] != "team-a" || p.MaxPendingSamples != 1000 || p.Protocol != PushRemoteWriteV2 {
		t.Fatalf("push section %+v", p)
	}
	dir := filepath.Dir(path)
	if p.HTTPClientConfig.BasicAuth == nil || p.HTTPClientConfig.BasicAuth.PasswordFile != filepath.Join(dir, "secret") || p.HTTPClientConfig.TLSConfig.CAFile != filepath.Join(dir, "ca.pem") {
		t.Errorf("HTTP client settings %+v: files relative to the config file's directory", p.HTTPClientConfig)
	}
	if !p.HTTPClientConfig.FollowRedirects || !p.HTTPClientConfig.EnableHTTP2 {
		t.Error("follow_redirects and enable_http2 default to true, as in Prometheus")
	}
	if f, _ := Load(writeFile(t, "plugins: {}\n"), trust.Policy{}); f.Push != nil {
		t.Error("no push section, yet Push is set")
	}
}

func TestPushSectionErrors(t *testing.T) {
	for in, want := range map[string]string{
		"push:\n  url: mimir:9009\n":                                           `push.url: "mimir:9009" is not an http:// or https:// URL`,
		"push:\n  url: http://m/\n  headers: {Content-Encoding: gzip}\n":       "push.headers: Content-Encoding is set by the remote write client",
		"push:\n  url: http://m/\n  external_labels: {0bad: x}\n":              `push.external_labels: "0bad" is not a label name`,
		"push:\n  url: http://m/\n  bearer_token: a\n  bearer_token_file: b\n": "at most one of bearer_token & bearer_token_file must be configured",
		"push:\n  url: http://m/\n  intervall: 1s\n":                           `3: unknown key "intervall"`,
		"push:\n  url: http://m/\n  interval: 5 s\n":                           "push.interval",
		"push:\n  url: http://m/\n  protocol: otel\n":                          `push.protocol: "otel" is not a push protocol (one of prometheus.remote_write.v1, prometheus.remote_write.v2, otlp)`,
	} {
		_, err := Load(writeFile(t, in), trust.Policy{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", in, err, want)
		}
	}
}

// TestDeployPushExample loads the gpu-node role's config with its push:
// section appended, as deploy/roles/gpu-node/push.yml says to.
func TestDeployPushExample(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "deploy", "roles", "gpu-node")
	role, err := os.ReadFile(filepath.Join(dir, "plexporter.yml"))
	if err != nil {
		t.Fatal(err)
	}
	push, err := os.ReadFile(filepath.Join(dir, "push.yml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Load(writeFile(t, string(role)+"\n"+string(push)), trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Push
	if p == nil || !strings.HasSuffix(p.URL, "/api/v1/push") || p.Headers["X-Scope-OrgID"] == "" || p.ExternalLabels["instance"] == "" ||
		p.HTTPClientConfig.BasicAuth == nil || p.HTTPClientConfig.BasicAuth.PasswordFile != "/etc/plexporter/push-password" || p.MaxPendingSamples != 2400000 || p.SpoolDir != "/var/lib/plexporter/push-spool" {
		t.Errorf("push section %+v", p)
	}
	if len(f.Plugins) == 0 {
		t.Error("the role's plugins section is gone")
	}
}

// TestREADMEPushExample loads the push: example of README.md's "Push
// (remote write or OTLP)" section, so the documented keys stay true.
func TestREADMEPushExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### Push (remote write or OTLP)")
	if !ok {
		t.Fatal(`README.md has no "### Push (remote write or OTLP)" section`)
	}
	_, block, ok := strings.Cut(sec, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block in README.md's push section")
	}
	f, err := Load(writeFile(t, block), trust.Policy{})
	if err != nil {
		t.Fatalf("README.md's push example: %v", err)
	}
	if f.Push == nil || f.Push.URL == "" || f.Push.SpoolDir == "" || f.Push.HTTPClientConfig.TLSConfig.CertFile == "" || f.Push.Protocol != PushRemoteWriteV1 {
		t.Errorf("README.md's push example read as %+v", f.Push)
	}
}
