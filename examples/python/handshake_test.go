package python

// The handshake as docs/plugin-protocol.md states it, checked on the plugin
// alone: started as the host would start it, without a host, and talked to
// with grpc-go. What the host cannot check from its side (that the plugin
// accepts only the client certificate it was given, rule 6) is checked here.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/plexporter/plexporter/internal/testkit/syncbuf"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/transport"
)

// clientCert makes a certificate like go-plugin's AutoMTLS client one.
func clientCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// plugin is the packed plugin, started as the host starts it.
type plugin struct {
	cmd      *exec.Cmd
	line     string   // the handshake line
	lifeline *os.File // the write end of fd 3
	stderr   syncbuf.Buffer
	exited   chan struct{} // closed when the process has exited, with exitErr
	exitErr  error
}

func startPlugin(t *testing.T, env ...string) *plugin {
	t.Helper()
	requirePython(t)
	if err := buildOnce(); err != nil {
		t.Fatal(err)
	}
	p := &plugin{exited: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.lifeline = pw
	p.cmd = exec.Command(filepath.Join(binDir, "plexporter-pyexample"))
	p.cmd.Env = env
	p.cmd.ExtraFiles = []*os.File{pr} // fd 3
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.lifeline.Close()
		p.cmd.Process.Kill()
		<-p.exited
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	select {
	case p.line = <-lines:
	case <-time.After(patience):
		t.Fatalf("no handshake line within %v", patience)
	}
	return p
}

// hostEnv is the environment the host gives a plugin (docs/plugin-protocol.md,
// Environment), with socketDir and the client certificate clientPEM.
func hostEnv(socketDir, clientPEM string) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		transport.LogLevelEnv + "=info",
		transport.LifelineEnv + "=3",
		transport.Handshake.MagicCookieKey + "=" + transport.Handshake.MagicCookieValue,
		"PLUGIN_MIN_PORT=10000", "PLUGIN_MAX_PORT=25000",
		"PLUGIN_PROTOCOL_VERSIONS=1",
		"PLUGIN_CLIENT_CERT=" + clientPEM,
		"PLUGIN_UNIX_SOCKET_DIR=" + socketDir,
	}
}

// handshake checks the plugin's handshake line and returns the socket and
// the plugin's certificate it names.
func (p *plugin) handshake(t *testing.T, socketDir string) (string, *x509.Certificate) {
	t.Helper()
	fields := strings.Split(strings.TrimSuffix(p.line, "\n"), "|")
	if len(fields) != 6 || fields[0] != "1" || fields[1] != "1" || fields[2] != "unix" || fields[4] != "grpc" {
		t.Fatalf("handshake line %q, want 1|1|unix|<socket>|grpc|<certificate>", p.line)
	}
	socket := fields[3]
	if filepath.Dir(socket) != socketDir || filepath.Clean(socket) != socket || len(filepath.Base(socket)) > 16 {
		t.Errorf("socket %q: want a clean path directly in %s, named in at most 16 bytes", socket, socketDir)
	}
	if fi, err := os.Lstat(socket); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket %q: want a unix socket there before the line (lstat: %v, %v)", socket, fi, err)
	}
	// go-plugin decodes with RawStdEncoding: padding would fail the start.
	der, err := base64.RawStdEncoding.DecodeString(fields[5])
	if err != nil {
		t.Fatalf("certificate field: %v (want base64 without padding)", err)
	}
	serverCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if err := serverCert.VerifyHostname("localhost"); err != nil {
		t.Errorf("server certificate: %v", err)
	}
	return socket, serverCert
}

// dial connects as the host does: trusting exactly the plugin's
// certificate, for server name localhost, presenting client.
func dial(t *testing.T, socket string, server *x509.Certificate, client []tls.Certificate) *grpc.ClientConn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(server)
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: roots, ServerName: "localhost", Certificates: client,
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// patience is how long these tests wait for what the plugin must do by
// itself (start, answer, exit): a deadline only matters when the test
// fails, and a Python process on a machine loaded by other tests can take
// many times longer than on a quiet one. What the host's own budgets are
// (10 s to start, 2 s to exit) is the host's business, not a bound on this
// machine's speed.
const patience = time.Minute

func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func TestHandshake(t *testing.T) {
	socketDir := t.TempDir()
	cert, certPEM := clientCert(t)
	p := startPlugin(t, hostEnv(socketDir, certPEM)...)
	socket, serverCert := p.handshake(t, socketDir)
	info := func(client []tls.Certificate) (*pluginv1.InfoResponse, error) {
		conn := dial(t, socket, serverCert, client)
		return pluginv1.NewPluginServiceClient(conn).Info(callContext(t), &pluginv1.InfoRequest{})
	}
	resp, err := info([]tls.Certificate{cert})
	if err != nil {
		t.Fatalf("Info with the host's client certificate: %v", err)
	}
	// The example implements the current protocol (its plugin_pb2 is
	// generated from it; it sends no native histograms, which are optional).
	if resp.GetApiVersion() != transport.APIVersion || resp.GetName() != "pyexample" {
		t.Errorf("Info = %v, want name pyexample, api_version %s", resp, transport.APIVersion)
	}
	var families []string
	for _, m := range resp.GetMetrics() {
		families = append(families, m.GetName())
	}
	if !slices.Contains(families, "pyexample_context_switches_total") || len(families) != 5 {
		t.Errorf("Info's catalogue = %v", families)
	}

	// Rule 6: anyone else who can reach the socket is refused.
	other, _ := clientCert(t)
	if _, err := info([]tls.Certificate{other}); err == nil {
		t.Error("Info with another client certificate succeeded; the plugin must accept only PLUGIN_CLIENT_CERT")
	}
	if _, err := info(nil); err == nil {
		t.Error("Info without a client certificate succeeded")
	}

	// Rule 8: the host is gone when the lifeline reads EOF.
	p.lifeline.Close()
	select {
	case <-p.exited:
		if p.exitErr != nil {
			t.Errorf("exit after the lifeline closed: %v, want status 0\n%s", p.exitErr, p.stderr.String())
		}
	case <-time.After(patience):
		t.Errorf("the plugin still runs %v after its lifeline closed", patience)
	}
}

// TestRefusesToRunByHand: without the magic cookie the plugin says what it
// is and exits non-zero (rule 2), before it listens anywhere.
func TestRefusesToRunByHand(t *testing.T) {
	requirePython(t)
	if err := buildOnce(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(binDir, "plexporter-pyexample")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "plexporter host runs it") {
		t.Errorf("run by hand: %v, %q; want a non-zero exit that says the host runs it", err, out)
	}
}

// TestHealthAndShutdown: go-plugin's health service answers SERVING for
// "plugin", and GRPCController/Shutdown, which the host calls when it stops
// a plugin, makes it exit within the host's 2 s grace.
func TestHealthAndShutdown(t *testing.T) {
	socketDir := t.TempDir()
	cert, certPEM := clientCert(t)
	p := startPlugin(t, hostEnv(socketDir, certPEM)...)
	socket, serverCert := p.handshake(t, socketDir)
	conn := dial(t, socket, serverCert, []tls.Certificate{cert})

	health := healthpb.NewHealthClient(conn)
	for service, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"plugin": healthpb.HealthCheckResponse_SERVING,
		"":       healthpb.HealthCheckResponse_SERVING,
		"other":  healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
	} {
		resp, err := health.Check(callContext(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("health of %q: %v, %v; want %v", service, resp, err, want)
		}
	}

	// plugin.Empty has no fields: emptypb.Empty is the same on the wire.
	start := time.Now()
	if err := conn.Invoke(callContext(t), "/plugin.GRPCController/Shutdown", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	select {
	case <-p.exited:
		if p.exitErr != nil {
			t.Errorf("exit after Shutdown: %v, want status 0\n%s", p.exitErr, p.stderr.String())
		}
	case <-time.After(patience):
		t.Errorf("the plugin still runs %v after Shutdown (the host kills it after 2 s)", time.Since(start))
	}
}

// TestExitsOnSIGTERM: the signal the host's death sends (rule 8).
func TestExitsOnSIGTERM(t *testing.T) {
	socketDir := t.TempDir()
	_, certPEM := clientCert(t)
	p := startPlugin(t, hostEnv(socketDir, certPEM)...)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.exitErr != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0\n%s", p.exitErr, p.stderr.String())
		}
	case <-time.After(patience):
		t.Errorf("the plugin still runs %v after SIGTERM", patience)
	}
}

// TestOneCollectAtATime: a Collect that arrives while another still runs
// (the host gave up on the first at its deadline, the plugin did not) waits
// for it instead of reading beside it (rule 11). The first one is held in
// a read of stat, a FIFO nobody writes yet; the second, with a short
// deadline, must end with DEADLINE_EXCEEDED having sent nothing — had it
// run beside the first, it would have sent loadavg's batch before blocking
// on the FIFO too.
func TestOneCollectAtATime(t *testing.T) {
	socketDir, procfs := t.TempDir(), t.TempDir()
	copyFile(t, "testdata/proc/loadavg", filepath.Join(procfs, "loadavg"), 0o644)
	stat := filepath.Join(procfs, "stat")
	if err := syscall.Mkfifo(stat, 0o644); err != nil {
		t.Fatal(err)
	}
	cert, certPEM := clientCert(t)
	p := startPlugin(t, hostEnv(socketDir, certPEM)...)
	socket, serverCert := p.handshake(t, socketDir)
	client := pluginv1.NewPluginServiceClient(dial(t, socket, serverCert, []tls.Certificate{cert}))
	if _, err := client.Configure(callContext(t), &pluginv1.ConfigureRequest{Paths: &pluginv1.Paths{Procfs: procfs}}); err != nil {
		t.Fatal(err)
	}

	// Long enough for a loaded machine: it ends when stat is written.
	firstCtx, cancelFirst := context.WithTimeout(context.Background(), 2*patience)
	defer cancelFirst()
	first, err := client.Collect(firstCtx, &pluginv1.CollectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := first.Recv(); err != nil || msg.GetBatch() == nil {
		t.Fatalf("first Collect: %v, %v; want loadavg's batch before it blocks on stat", msg, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	second, err := client.Collect(ctx, &pluginv1.CollectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	for {
		msg, err := second.Recv()
		if err != nil {
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("second Collect ended with %v, want DEADLINE_EXCEEDED", err)
			}
			break
		}
		if msg.GetBatch() != nil {
			batches++
		}
	}
	if batches != 0 {
		t.Errorf("the second Collect sent %d batches while the first still ran; want it to wait", batches)
	}

	// Let the first one finish: it reads stat and ends OK.
	if err := os.WriteFile(stat, []byte("ctxt 7\nprocesses 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	msg, err := first.Recv()
	if err != nil || len(msg.GetBatch().GetFamilies()) != 2 {
		t.Errorf("first Collect after stat answered: %v, %v; want stat's two families", msg, err)
	}
	if _, err := first.Recv(); err != io.EOF {
		t.Errorf("first Collect's end: %v, want OK", err)
	}
}
