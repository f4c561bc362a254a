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

// TestDeployPushTwoTargetsExample loads the gpu-node role's config with
// push-two-targets.yml appended: two targets, different protocols, own
// spool or none.
func TestDeployPushTwoTargetsExample(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "deploy", "roles", "gpu-node")
	role, err := os.ReadFile(filepath.Join(dir, "plexporter.yml"))
	if err != nil {
		t.Fatal(err)
	}
	push, err := os.ReadFile(filepath.Join(dir, "push-two-targets.yml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Load(writeFile(t, string(role)+"\n"+string(push)), trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.PushList) != 2 {
		t.Fatalf("push targets %+v", f.PushList)
	}
	m, o := f.PushList[0], f.PushList[1]
	if m.Name != "mimir" || m.Protocol != "" || m.HTTPClientConfig.BasicAuth == nil || m.SpoolDir == "" || m.Headers["X-Scope-OrgID"] == "" {
		t.Errorf("push[0] %+v", m)
	}
	if o.Name != "site-otel" || o.Protocol != PushOTLP || o.SpoolDir != "" || o.Interval != m.Interval {
		t.Errorf("push[1] %+v", o)
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
	// The list of several targets, the section's next yaml block.
	_, sec, _ = strings.Cut(sec, "**Several targets**")
	_, block, ok = strings.Cut(sec, "```yaml\n")
	block, _, ok2 = strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block of several targets in README.md's push section")
	}
	f, err = Load(writeFile(t, block), trust.Policy{})
	if err != nil {
		t.Fatalf("README.md's example of several targets: %v", err)
	}
	if len(f.PushList) != 2 || f.PushList[1].Protocol != PushOTLP {
		t.Errorf("README.md's example of several targets read as %+v", f.PushList)
	}
}

// TestPushList reads push: as a list of targets, each with every key of
// the single mapping.
func TestPushList(t *testing.T) {
	path := writeFile(t, `push:
  - name: mimir
    url: https://mimir.example/api/v1/push
    external_labels: {cluster: a}
    basic_auth: {username: u, password_file: secret}
    spool_dir: spool-mimir
  - url: http://collector:4318/v1/metrics
    protocol: otlp
    interval: 30s
    enable_http2: false
    spool_dir: /var/lib/plexporter/otel
`)
	f, err := Load(path, trust.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Push != nil || len(f.PushList) != 2 || len(f.PushTargets()) != 2 {
		t.Fatalf("push %+v, list %+v", f.Push, f.PushList)
	}
	dir := filepath.Dir(path)
	m, o := f.PushList[0], f.PushList[1]
	if PushName(m) != "mimir" || m.ExternalLabels["cluster"] != "a" || m.HTTPClientConfig.BasicAuth.PasswordFile != filepath.Join(dir, "secret") || m.SpoolDir != filepath.Join(dir, "spool-mimir") || !m.HTTPClientConfig.EnableHTTP2 || !m.HTTPClientConfig.FollowRedirects {
		t.Errorf("push[0] %+v", m)
	}
	if o.Name != "" || PushName(o) != DefaultPushName(o.URL) || len(PushName(o)) != 6 || o.Protocol != PushOTLP || o.Interval != 30*time.Second || o.HTTPClientConfig.EnableHTTP2 || !o.HTTPClientConfig.FollowRedirects {
		t.Errorf("push[1] %+v (name %q)", o, PushName(o))
	}
	if f, _ := Load(writeFile(t, "push:\n  url: http://m/\n"), trust.Policy{}); len(f.PushTargets()) != 1 || f.PushList != nil {
		t.Error("the single mapping is not one target")
	}
	if f, _ := Load(writeFile(t, "push: []\n"), trust.Policy{}); len(f.PushTargets()) != 0 {
		t.Error("an empty list has targets")
	}
	// Two tenants of one receiver: the same URL, another X-Scope-OrgID,
	// or another basic-auth user.
	for _, in := range []string{
		"push:\n  - {name: a, url: http://m/, headers: {X-Scope-OrgID: team-a}}\n  - {name: b, url: http://m/, headers: {X-Scope-OrgID: team-b}}\n",
		"push:\n  - {name: a, url: http://m/, basic_auth: {username: a, password: x}}\n  - {name: b, url: http://m/, basic_auth: {username: b, password: x}}\n",
	} {
		if f, err := Load(writeFile(t, in), trust.Policy{}); err != nil || len(f.PushTargets()) != 2 {
			t.Errorf("%s: two tenants of one receiver refused: %v", in, err)
		}
	}
}

func TestPushListErrors(t *testing.T) {
	for in, want := range map[string]string{
		"push:\n  - {name: a, url: http://m/}\n  - {name: a, url: http://n/}\n":                                 `: push[1] (a).name: "a" is the name of push[0] too`,
		"push:\n  - {url: http://m/}\n  - {name: b, url: http://m/}\n":                                          `: push[1] (b).url: http://m/ is the url of push[0] (` + DefaultPushName("http://m/") + `) too, with the same headers and credentials`,
		"push:\n  - {name: a, url: http://m/, spool_dir: s}\n  - {name: otel, url: http://n/, spool_dir: s/}\n": `: push[1] (otel).spool_dir: `,
		"push:\n  - {name: a, url: http://m/}\n  - {name: 'b c', url: http://n/}\n":                             `: push[1] (b c).name: "b c" is not a target name`,
		"push:\n  - {name: a}\n": `: push[0] (a).url: missing`,
		"push:\n  - {name: a, url: http://m/}\n  - {url: http://n/, protocol: x}\n": `: push[1].protocol: "x" is not a push protocol`,
		"push:\n  - name: a\n    url: http://m/\n    intervall: 1s\n":               `4: unknown key "intervall"`,
		"push:\n  - {name: a, url: http://m/}\n  -\n":                               `: push[1]: empty target`,
		"push:\n  name: -a\n  url: http://m/\n":                                     `: push.name: "-a" is not a target name`,
		"push:\n  - url: [a]\n":                                                     `:2: push[0].url: got a list, want a string`,
		"push: 3\n":                                                                 `:1: push: got the number 3, want a mapping (one target) or a list of them`,
	} {
		path := writeFile(t, in)
		_, err := Load(path, trust.Policy{})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: got %v, want an error naming the file and containing %q", in, err, want)
		}
	}
	// Two targets on one spool directory: the error names both.
	path := writeFile(t, "push:\n  - {name: a, url: http://m/, spool_dir: s}\n  - {name: otel, url: http://n/, spool_dir: s/}\n")
	_, err := Load(path, trust.Policy{})
	want := path + ": push[1] (otel).spool_dir: " + filepath.Join(filepath.Dir(path), "s") + " is the spool_dir of push[0] (a) too"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}
