package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Push is the push: section, or one target of its list form: where and
// how the host sends the merged, guarded snapshot that /metrics serves:
// Prometheus remote write 1.0 (default) or 2.0, or OTLP/HTTP (Protocol).
// Zero values take the defaults below (a --push.* flag, when given, wins
// over the file's single mapping; with a list, the flags are an error).
//
//	push:
//	  url: https://mimir.example/api/v1/push
//	  interval: 15s
//	  external_labels: {cluster: gpu-a, instance: node-17}
//	  headers: {X-Scope-OrgID: team-a}
//	  basic_auth: {username: u, password_file: /etc/plexporter/push-password}
//	  tls_config: {ca_file: /etc/ssl/mimir-ca.pem}
type Push struct {
	// Name is the target's remote_name label in the plexporter_push_*
	// self-metrics and its name in logs and errors (default: a hash of
	// the URL, DefaultPushName). Unique within the list.
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Protocol is one of Protocols (default PushRemoteWriteV1).
	Protocol string `yaml:"protocol"`
	// Interval between snapshots (default DefaultPushInterval).
	Interval time.Duration `yaml:"interval"`
	// RemoteTimeout bounds one HTTP request (default 30s).
	RemoteTimeout time.Duration `yaml:"remote_timeout"`
	// ExternalLabels are added to every series that lacks them.
	ExternalLabels map[string]string `yaml:"external_labels"`
	// Headers are sent with every request.
	Headers map[string]string `yaml:"headers"`
	// MaxPendingSamples bounds the memory ring of unsent samples
	// (default 500000); past it the oldest batches are dropped, counted.
	MaxPendingSamples int `yaml:"max_pending_samples"`
	// MaxSamplesPerSend is the most samples in one request (default 2000).
	MaxSamplesPerSend int `yaml:"max_samples_per_send"`
	// MinBackoff and MaxBackoff bound the retry backoff (defaults 30ms
	// and 5s, Prometheus's); a Retry-After is added to it.
	MinBackoff time.Duration `yaml:"min_backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// FlushTimeout bounds the sending of what is pending at shutdown
	// (default 10s).
	FlushTimeout time.Duration `yaml:"flush_timeout"`
	// SpoolDir, when set, keeps every queued snapshot on disk until it is
	// sent, so a restart or a crash loses nothing; the next start sends
	// what it finds there first. Bounded by SpoolMaxBytes (default 512
	// MiB) and SpoolMaxAge (default 1h), oldest dropped first, counted.
	SpoolDir      string        `yaml:"spool_dir"`
	SpoolMaxBytes int64         `yaml:"spool_max_bytes"`
	SpoolMaxAge   time.Duration `yaml:"spool_max_age"`
	// HTTPClientConfig: basic_auth, authorization, bearer_token_file,
	// oauth2, tls_config, proxy_url, follow_redirects, enable_http2, as in
	// Prometheus's remote_write.
	HTTPClientConfig promconfig.HTTPClientConfig `yaml:",inline"`
}

// Push protocols (push.protocol, --push.protocol).
const (
	PushRemoteWriteV1 = "prometheus.remote_write.v1" // Prometheus remote write 1.0 (the default)
	PushRemoteWriteV2 = "prometheus.remote_write.v2" // Prometheus remote write 2.0
	PushOTLP          = "otlp"                       // OTLP/HTTP, protobuf
)

// PushProtocols lists the values of push.protocol.
var PushProtocols = []string{PushRemoteWriteV1, PushRemoteWriteV2, PushOTLP}

// CheckPushProtocol says what is wrong with a push protocol's name ("" is
// the default).
func CheckPushProtocol(p string) error {
	if p == "" || slices.Contains(PushProtocols, p) {
		return nil
	}
	return fmt.Errorf("%q is not a push protocol (one of %s)", p, strings.Join(PushProtocols, ", "))
}

// DefaultPushInterval is the push interval when neither the file nor
// --push.interval sets one.
const DefaultPushInterval = 15 * time.Second

// reservedPushHeaders are set by the remote write client; a header of the
// same name in headers: would break the protocol.
var reservedPushHeaders = []string{"Content-Type", "Content-Encoding", "Content-Length", "X-Prometheus-Remote-Write-Version", "User-Agent", "Authorization", "Host", "Retry-Attempt"}

// DefaultPushName is the name of a target that sets none: the first 6
// hex digits of the SHA-256 of its URL, as Prometheus names a remote_write
// without name: by a hash (of its whole section there).
func DefaultPushName(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:3])
}

// PushName is p's name: its own, else DefaultPushName of its URL.
func PushName(p *Push) string {
	if p.Name != "" {
		return p.Name
	}
	return DefaultPushName(p.URL)
}

// pushNameRE is what a target's name may be: a label value that reads
// well in a PromQL matcher, a log line and an error.
var pushNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$`)

// PushTargets returns every push target of the file: the single mapping,
// or the list; none without a push: section.
func (f *File) PushTargets() []*Push {
	if f.Push != nil {
		return []*Push{f.Push}
	}
	return f.PushList
}

// checkPushList checks every target of the list form (node is the list's
// yaml node): each as the single mapping is, then the names, URLs and
// spool directories unique among them.
func checkPushList(path string, list []*Push, node *yaml.Node) error {
	names, urls, spools := map[string]string{}, map[string]string{}, map[string]string{}
	for i, p := range list {
		key := fmt.Sprintf("%s: push[%d]", path, i)
		if p == nil {
			return fmt.Errorf("%s: empty target (each item of the list is a mapping with url: and the other keys of a single push: section)", key)
		}
		if p.Name != "" {
			key += " (" + p.Name + ")"
		}
		var elem *yaml.Node
		if node != nil && i < len(node.Content) {
			elem = node.Content[i]
		}
		if err := p.check(path, key, elem); err != nil {
			return err
		}
		if p.URL == "" {
			return fmt.Errorf("%s.url: missing (each target of the list needs its own url:; --push.url does not apply to a list)", key)
		}
		name := PushName(p)
		if p.Name == "" {
			key += " (" + name + ")"
		}
		if prev, dup := names[name]; dup {
			return fmt.Errorf("%s.name: %q is the name of %s too (the names label the plexporter_push_* self-metrics as remote_name: give each target its own)", key, name, prev)
		}
		names[name] = fmt.Sprintf("push[%d]", i)
		// One receiver may hold several tenants (Mimir's X-Scope-OrgID, a
		// basic-auth user): a target is where its samples land, the URL
		// with the headers and credentials sent there.
		dest := pushDestination(p)
		if prev, dup := urls[dest]; dup {
			return fmt.Errorf("%s.url: %s is the url of %s too, with the same headers and credentials (the same samples would land there twice; for another tenant of the same receiver set its header, such as X-Scope-OrgID, or its credentials)", key, p.URL, prev)
		}
		urls[dest] = fmt.Sprintf("push[%d] (%s)", i, name)
		if p.SpoolDir != "" {
			dir := filepath.Clean(p.SpoolDir)
			if prev, dup := spools[dir]; dup {
				return fmt.Errorf("%s.spool_dir: %s is the spool_dir of %s too (each target needs its own: a spool holds one target's unsent requests, and a start drops the files of another protocol)", key, dir, prev)
			}
			spools[dir] = fmt.Sprintf("push[%d] (%s)", i, name)
		}
	}
	return nil
}

// pushDestination is where a target's samples land: its URL, headers and
// HTTP client settings (credentials files, user names, TLS; secrets
// themselves marshal as <secret>, so two passwords alone do not make two
// destinations).
func pushDestination(p *Push) string {
	h, _ := yaml.Marshal(p.Headers)
	c, _ := yaml.Marshal(p.HTTPClientConfig)
	return p.URL + "\n" + string(h) + string(c)
}

// check validates the section (node, its yaml node, of the file at path;
// key names it in errors) and makes its file paths relative to the config
// file's directory.
func (p *Push) check(path, key string, node *yaml.Node) error {
	if p.Name != "" && !pushNameRE.MatchString(p.Name) {
		return fmt.Errorf("%s.name: %q is not a target name (1 to 63 letters, digits, _, . and -, not starting with . or -)", key, p.Name)
	}
	if p.URL != "" {
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url: %q is not an http:// or https:// URL (the receiver's remote write endpoint, such as http://prometheus:9090/api/v1/write)", key, p.URL)
		}
	}
	if err := CheckPushProtocol(p.Protocol); err != nil {
		return fmt.Errorf("%s.protocol: %w", key, err)
	}
	for name, d := range map[string]time.Duration{"interval": p.Interval, "remote_timeout": p.RemoteTimeout, "min_backoff": p.MinBackoff, "max_backoff": p.MaxBackoff, "flush_timeout": p.FlushTimeout, "spool_max_age": p.SpoolMaxAge} {
		if d < 0 {
			return fmt.Errorf("%s.%s: must be positive", key, name)
		}
	}
	if p.MaxPendingSamples < 0 || p.MaxSamplesPerSend < 0 || p.SpoolMaxBytes < 0 {
		return fmt.Errorf("%s: max_pending_samples, max_samples_per_send and spool_max_bytes must not be negative", key)
	}
	if p.SpoolDir != "" && !filepath.IsAbs(p.SpoolDir) {
		p.SpoolDir = filepath.Join(filepath.Dir(path), p.SpoolDir)
	}
	for name, v := range p.ExternalLabels {
		if !model.LegacyValidation.IsValidLabelName(name) || strings.HasPrefix(name, "__") {
			return fmt.Errorf("%s.external_labels: %q is not a label name (letters, digits and _, not starting with a digit or __)", key, name)
		}
		if v == "" {
			return fmt.Errorf("%s.external_labels.%s: empty value (a label with an empty value is no label; remove it)", key, name)
		}
	}
	for name := range p.Headers {
		for _, r := range reservedPushHeaders {
			if http.CanonicalHeaderKey(name) == r {
				return fmt.Errorf("%s.headers: %s is set by the remote write client (credentials go in basic_auth, authorization or bearer_token_file)", key, name)
			}
		}
	}
	// The inline HTTP client settings skip HTTPClientConfig's own
	// UnmarshalYAML, which would default these two to true.
	if node != nil {
		if k, _ := lookup(node, "follow_redirects"); k == nil {
			p.HTTPClientConfig.FollowRedirects = true
		}
		if k, _ := lookup(node, "enable_http2"); k == nil {
			p.HTTPClientConfig.EnableHTTP2 = true
		}
	}
	p.HTTPClientConfig.SetDirectory(filepath.Dir(path))
	if err := p.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}
