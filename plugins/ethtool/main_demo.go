//go:build demo

// The demo build of plexporter-ethtool (make demo): the plugin unchanged,
// except that driver statistics come from the `ethtool -S` captures in
// testdata/ instead of the SIOCETHTOOL ioctl, which needs the NICs. The
// demo's sysfs (internal/dev/demo/demotree) has the netdevs of
// testdata/sysfs.ttar; they get the captures the tests serve them
// (fixtures_test.go). The tree also has the card's second port
// (ens1f1np1), which gets mlx5_ens1f1np1.txt: the same port with 802.3x
// global pause on and PFC off. Standard statistics answer as a kernel
// without the ethtool netlink family does: no series.
package main

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/plexporter/plexporter/sdk"
)

var (
	//go:embed testdata/mlx5_ens1f0np0.txt
	demoMLX5 string
	//go:embed testdata/ionic_enp.txt
	demoIonic string
	// The card's second port (ens1f1np1, the demo's own sysfs in
	// internal/dev/demo/demotree): 802.3x global pause on, PFC off.
	//go:embed testdata/mlx5_ens1f1np1.txt
	demoMLX5GlobalPause string
)

func main() {
	captures := map[string]string{"ens1f0np0": demoMLX5, "ens1f0v0": demoMLX5, "ibp196s0": demoMLX5, "enp68s0": demoIonic, "ens1f1np1": demoMLX5GlobalPause}
	src := demoSource{}
	for netdev, text := range captures {
		st, err := parseEthtoolText(text)
		if err != nil {
			panic(fmt.Sprintf("demo capture of %s: %v", netdev, err))
		}
		src[netdev] = st
	}
	p := newPlugin()
	p.src, p.std = src, demoNoNetlink{}
	sdk.Serve(p)
}

// demoSource answers driver statistics from the captures; a netdev without
// one has none (as a bridge).
type demoSource map[string]*driverStats

func (s demoSource) DriverStats(_ context.Context, netdev string) (*driverStats, error) {
	if st, ok := s[netdev]; ok {
		return st, nil
	}
	return nil, errNoStats
}

type demoNoNetlink struct{}

func (demoNoNetlink) StandardStats(context.Context, string, stdRequest) (*stdStats, error) {
	return nil, errNoStats
}
