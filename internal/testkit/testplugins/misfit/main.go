// Command misfit is a test-only plugin (never shipped) for the conformance
// runner (`plexporter plugin check`). Installed as plexporter-misfit it
// conforms to every rule; installed as plexporter-misfit-<fault> it breaks
// exactly one, so each rule is shown to fail on what it is about and on
// nothing else.
//
// It speaks the protocol directly — go-plugin's server, the generated
// PluginService, batches built by hand — rather than through the SDK, whose
// Writer would not let it send most of its faults (and whose guarantees it
// must not depend on: the runner judges what a plugin sends).
//
// Config (plugins.<name>.config): series, a number (default 3). Any other
// key, or another type, is refused with INVALID_ARGUMENT.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/metricfilter"
	"github.com/plexporter/plexporter/sdk/transport"
)

// The faults, by the suffix of the file name (plexporter-misfit-<fault>),
// each with the rule it breaks.
const (
	faultNone        = ""
	faultNoCookie    = "nocookie"    // handshake.cookie: exits 0 without the cookie
	faultBadProto    = "badproto"    // handshake: offers application protocol 2 only
	faultBadName     = "badname"     // info.name: reports another name
	faultNoVersion   = "noversion"   // info.version: reports no version
	faultBadCatalog  = "badcatalog"  // info.catalogue: lists an invalid family name
	faultConfigCrash = "configcrash" // configure.unknown-key: dies on a key it does not know
	faultLaxTypes    = "laxtypes"    // configure.wrong-type: takes any type for series
	faultHang        = "hang"        // collect: never ends a Collect
	faultBadValue    = "badvalue"    // collect.guard: a label value that is not UTF-8
	faultDuplicate   = "duplicate"   // collect.duplicates: one series twice
	faultUndeclared  = "undeclared"  // collect.catalogue: a family not in the catalogue
	faultGrowing     = "growing"     // collect.stable: one more series at every Collect
	faultNoCancel    = "nocancel"    // collect.cancel: works on for seconds after a cancel
	faultNoAllowlist = "noallowlist" // allowlist.one, allowlist.none: ignores the allowlist
	faultNoPrefix    = "noprefix"    // metric-prefix: ignores metric_prefix
	faultBareAllow   = "bareallow"   // allowlist.prefixed: also matches the allowlist on names without metric_prefix
	faultDies        = "dies"        // process.up: exits on its own a second after its last Collect
	faultNoStop      = "nostop"      // stop: lives on when the host closes the connection
	faultNoLifeline  = "nolifeline"  // lifeline: ignores fd 3
)

// A dies plugin exits dieAfter after its last Collect, as plexporter-so
// does a second after giving up on a library's stuck collect; the Collects
// that come sooner are answered as usual.
const dieAfter = time.Second

// A nocancel Collect takes slowCollect, its context ignored; once
// cancelled, it goes on for lingerCancelled more (reading every device the
// host no longer waits for), holding up the next Collect.
const (
	slowCollect     = 500 * time.Millisecond
	lingerCancelled = 3 * time.Second
)

const (
	infoFamily  = "misfit_info"
	valueFamily = "misfit_value"
	extraFamily = "misfit_undeclared"
)

type misfit struct {
	pluginv1.UnimplementedPluginServiceServer
	name, fault string

	mu       sync.Mutex
	series   int
	filter   *metricfilter.Filter
	prefix   string
	collects int
	dying    *time.Timer // faultDies: the exit, pushed back at every Collect
	// collecting admits one Collect at a time, as the SDK does: a Collect
	// that ignores its cancellation then holds up the next one.
	collecting sync.Mutex
}

func (m *misfit) Info(context.Context, *pluginv1.InfoRequest) (*pluginv1.InfoResponse, error) {
	resp := &pluginv1.InfoResponse{
		Name:       m.name,
		Version:    "0.0.1-test",
		ApiVersion: transport.APIVersion,
		Metrics: []*pluginv1.MetricDescriptor{
			{Name: infoFamily, Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Help: "The misfit's fault.", LabelNames: []string{"fault"}},
			{Name: valueFamily, Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Help: "Test series.", LabelNames: []string{"i"}},
		},
	}
	switch m.fault {
	case faultBadName:
		resp.Name = "Misfit!"
	case faultNoVersion:
		resp.Version = ""
	case faultBadCatalog:
		resp.Metrics = append(resp.Metrics, &pluginv1.MetricDescriptor{Name: "misfit-listed-not-sent", Type: pluginv1.MetricType_METRIC_TYPE_GAUGE})
	}
	return resp, nil
}

func (m *misfit) Configure(_ context.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	series := 3
	for key, v := range req.GetConfig().GetFields() {
		switch {
		case key == "series":
			n, ok := v.GetKind().(*structpb.Value_NumberValue)
			if !ok && m.fault != faultLaxTypes {
				return nil, status.Errorf(codes.InvalidArgument, "series: want a number, got %s", kind(v))
			}
			if ok {
				series = int(n.NumberValue)
			}
		case m.fault == faultConfigCrash:
			panic("misfit: no idea what " + key + " is")
		default:
			return nil, status.Errorf(codes.InvalidArgument, "%s: unknown key (the only one is series)", key)
		}
	}
	filter, err := metricfilter.New(req.GetEnabledMetrics(), req.GetDisabledMetrics())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	m.mu.Lock()
	m.series, m.filter, m.prefix = series, filter, req.GetMetricPrefix()
	if m.fault == faultNoPrefix {
		m.prefix = ""
	}
	m.mu.Unlock()
	return &pluginv1.ConfigureResponse{}, nil
}

func kind(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return "a string"
	case *structpb.Value_BoolValue:
		return "a boolean"
	case *structpb.Value_StructValue:
		return "a mapping"
	case *structpb.Value_ListValue:
		return "a list"
	}
	return "null"
}

func (m *misfit) Collect(_ *pluginv1.CollectRequest, stream pluginv1.PluginService_CollectServer) error {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	m.mu.Lock()
	m.collects++
	series, filter, collects, prefix := m.series, m.filter, m.collects, m.prefix
	m.mu.Unlock()
	ctx := stream.Context()
	switch m.fault {
	case faultHang:
		forever() // the host's deadline passes, and the next, and the next
	case faultNoCancel:
		// A first message, as a plugin that streams its batches sends one,
		// and the runner cancels after it; then the slow part. A failed
		// Send is ignored like the context: on a loaded machine the cancel
		// can come before it, and this plugin must linger all the same.
		_ = stream.Send(&pluginv1.CollectResponse{})
		time.Sleep(slowCollect)
		if ctx.Err() != nil {
			time.Sleep(lingerCancelled)
		}
	case faultGrowing:
		series += collects
	case faultNoAllowlist:
		filter = nil
	case faultDies:
		m.dieLater()
	}
	// The filter matches the names as written, prefix included.
	allow := filter.Allow
	if m.fault == faultBareAllow {
		allow = func(name string) bool { return filter.Allow(name) || filter.Allow(strings.TrimPrefix(name, prefix)) }
	}
	info, value, extra := prefix+infoFamily, prefix+valueFamily, prefix+extraFamily
	b := newBatch()
	if allow(info) {
		b.gauge(info, "The misfit's fault.", "fault", []string{m.fault})
	}
	if allow(value) {
		values := make([]string, 0, series+1)
		for i := range series {
			values = append(values, strconv.Itoa(i))
		}
		switch m.fault {
		case faultDuplicate:
			values = append(values, "0")
		case faultBadValue:
			values = append(values, "bad\xffvalue")
		}
		b.gauge(value, "Test series.", "i", values)
	}
	if m.fault == faultUndeclared && allow(extra) {
		b.gauge(extra, "Not in the catalogue.", "i", []string{"0"})
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return stream.Send(&pluginv1.CollectResponse{Batch: b.b})
}

// dieLater (re)arms the exit dieAfter from now.
func (m *misfit) dieLater() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dying != nil {
		m.dying.Reset(dieAfter)
		return
	}
	m.dying = time.AfterFunc(dieAfter, func() {
		fmt.Fprintln(os.Stderr, "misfit: a collect is stuck; exiting so that the host restarts the plugin")
		os.Exit(3)
	})
}

// batch builds one batch with its string table.
type batch struct {
	b     *pluginv1.Batch
	index map[string]uint32
}

func newBatch() *batch {
	return &batch{b: &pluginv1.Batch{Strings: [][]byte{{}}}, index: map[string]uint32{"": 0}}
}

func (b *batch) str(s string) uint32 {
	if i, ok := b.index[s]; ok {
		return i
	}
	i := uint32(len(b.b.Strings))
	b.b.Strings = append(b.b.Strings, []byte(s))
	b.index[s] = i
	return i
}

// gauge adds a gauge chunk with one label, one sample per value, each
// sample's value its position.
func (b *batch) gauge(name, help, label string, values []string) {
	ch := &pluginv1.FamilyChunk{Name: b.str(name), Type: pluginv1.MetricType_METRIC_TYPE_GAUGE, Help: b.str(help), LabelNames: []uint32{b.str(label)}}
	for i, v := range values {
		ch.LabelValues = append(ch.LabelValues, b.str(v))
		ch.Values = append(ch.Values, float64(i))
	}
	b.b.Families = append(b.b.Families, ch)
}

// watchLifeline exits once the host's end of the lifeline pipe closes.
func watchLifeline() {
	fd, err := strconv.Atoi(os.Getenv(transport.LifelineEnv))
	if err != nil || fd < 3 {
		return
	}
	f := os.NewFile(uintptr(fd), "lifeline")
	go func() {
		var buf [1]byte
		for {
			if _, err := f.Read(buf[:]); err != nil {
				os.Exit(0)
			}
		}
	}()
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "plexporter-")
	fault := strings.TrimPrefix(strings.TrimPrefix(name, "misfit"), "-")
	if fault == faultNoCookie && os.Getenv(transport.Handshake.MagicCookieKey) == "" {
		os.Exit(0) // silently, and "successfully"
	}
	if fault == faultBadProto {
		if os.Getenv(transport.Handshake.MagicCookieKey) != transport.Handshake.MagicCookieValue {
			fmt.Fprintln(os.Stderr, "misfit: not started by plexporter")
			os.Exit(1)
		}
		// A plugin of a protocol the host does not speak: go-plugin's
		// server would write its lowest version, so does this one.
		fmt.Printf("%d|%d|unix|%s|grpc|\n", plugin.CoreProtocolVersion, transport.ProtocolVersion+1, filepath.Join(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"), "plugin.sock"))
		forever()
	}
	if fault != faultNoLifeline {
		watchLifeline()
	}
	m := &misfit{name: name, fault: fault, series: 3}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  transport.Handshake,
		VersionedPlugins: transport.PluginSet(m),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Warn}),
	})
	// go-plugin returns once the host closed the connection.
	if fault == faultNoStop {
		forever()
	}
	fmt.Fprintln(os.Stderr, "misfit: the host closed the connection; exiting")
	os.Exit(0)
}

// forever blocks for good (a bare select{} in a process with nothing else
// left to run is a fatal deadlock, not a hang).
func forever() {
	for {
		time.Sleep(time.Hour)
	}
}
