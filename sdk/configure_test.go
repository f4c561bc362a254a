package sdk_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/internal/testhook"
)

// configurable warns or fails at Configure as told.
type configurable struct {
	warn []string
	fail error
}

func (c *configurable) Info() sdk.Info { return sdk.Info{Name: "c", Version: "1"} }
func (c *configurable) Configure(_ context.Context, cfg sdk.Config) error {
	for _, w := range c.warn {
		cfg.Warn("%s", w)
	}
	return c.fail
}
func (c *configurable) Collect(context.Context, *sdk.Writer) error { return nil }

func TestConfigureWarningsReachTheHost(t *testing.T) {
	p := &configurable{warn: []string{"exclude_devices: mlx5_9 does not exist", "qp_counters is deprecated"}}
	srv := testhook.NewServer(p, nil)
	for range 2 { // each Configure answers its own warnings
		resp, err := srv.Configure(context.Background(), &pluginv1.ConfigureRequest{})
		if err != nil || !slices.Equal(resp.GetWarnings(), p.warn) {
			t.Fatalf("warnings %q, %v; want %q", resp.GetWarnings(), err, p.warn)
		}
	}
	// A Config a test builds itself has nowhere to send them: Warn must not panic.
	sdk.Config{}.Warn("logged instead")
}

// A rejection reaches the host as INVALID_ARGUMENT carrying the plugin's
// message as it wrote it: the host shows that text to the operator.
func TestConfigureRejectionKeepsThePluginsMessage(t *testing.T) {
	srv := testhook.NewServer(&configurable{fail: errors.New(`device "mlx5_9": no such device`)}, nil)
	_, err := srv.Configure(context.Background(), &pluginv1.ConfigureRequest{})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != `device "mlx5_9": no such device` {
		t.Fatalf("status %v %q", st.Code(), st.Message())
	}
}

// versionSeen keeps the host version its Configure was given.
type versionSeen struct {
	configurable
	host string
}

func (v *versionSeen) Configure(_ context.Context, cfg sdk.Config) error {
	v.host = cfg.HostAPIVersion
	return nil
}

// Config.HostAPIVersion is what the host says it implements, and 1.0.0 for
// a host that says nothing (every host before 1.2.0).
func TestConfigureTellsTheHostsVersion(t *testing.T) {
	for sent, want := range map[string]string{"1.2.0": "1.2.0", "1.7.3": "1.7.3", "": "1.0.0"} {
		p := &versionSeen{}
		if _, err := testhook.NewServer(p, nil).Configure(context.Background(), &pluginv1.ConfigureRequest{HostApiVersion: sent}); err != nil {
			t.Fatal(err)
		}
		if p.host != want {
			t.Errorf("host_api_version %q: the plugin saw %q, want %q", sent, p.host, want)
		}
	}
}

// devicesSeen keeps the device filter its Configure was given.
type devicesSeen struct {
	configurable
	devices *sdk.Devices
}

func (d *devicesSeen) Configure(_ context.Context, cfg sdk.Config) error {
	d.devices = cfg.Devices
	return nil
}

// Config.Devices is the host's --device.include/--device.exclude; none
// allows every device, and a bad expression is INVALID_ARGUMENT naming
// the field.
func TestConfigureTellsTheDeviceFilter(t *testing.T) {
	p := &devicesSeen{}
	srv := testhook.NewServer(p, nil)
	if _, err := srv.Configure(context.Background(), &pluginv1.ConfigureRequest{DeviceInclude: "^mlx5_", DeviceExclude: "^mlx5_bond_0$"}); err != nil {
		t.Fatal(err)
	}
	for dev, want := range map[string]bool{"mlx5_0": true, "mlx5_bond_0": false, "nvme0": false} {
		if got := p.devices.Allow(dev); got != want {
			t.Errorf("Allow(%q) = %v, want %v", dev, got, want)
		}
	}
	if _, err := srv.Configure(context.Background(), &pluginv1.ConfigureRequest{}); err != nil || p.devices != nil || !p.devices.Allow("anything") {
		t.Errorf("no filter: err %v, devices %v", err, p.devices)
	}
	_, err := srv.Configure(context.Background(), &pluginv1.ConfigureRequest{DeviceExclude: "mlx5_("})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "device_exclude: ") {
		t.Errorf("bad expression: %v %q", st.Code(), st.Message())
	}
}
