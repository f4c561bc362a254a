package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/plexporter/plexporter/sdk"
)

// The metric types of the C ABI (enum plexporter_metric_type).
const (
	abiCounter   = 1
	abiGauge     = 2
	abiUntyped   = 3
	abiHistogram = 4
)

// abiVersion is PLEXPORTER_COLLECTOR_ABI_VERSION, the one version this
// plugin loads.
const abiVersion = 1

// Bounds on what a library's info may declare: a catalogue beyond them is
// a corrupt or hostile info struct, refused before it is walked further.
const (
	maxFamilies = 1 << 16
	maxLabels   = 64
)

// errNoCgo is what a build without cgo says when asked to load a library.
var errNoCgo = errors.New("this plexporter-so was built without cgo (CGO_ENABLED=0) and cannot load shared objects: build it with CGO_ENABLED=1, as make build does")

// library is one loaded collector. Its methods call into the shared object
// and return when it does — Collect possibly never.
type library interface {
	Path() string
	Info() collectorInfo
	Configure(json string) error
	// Collect runs one collect, relaying what it emits to r; deadline is
	// the one the library is given.
	Collect(r *relay, deadline time.Time) error
}

// collectorInfo is a library's plexporter_collector_info, copied.
type collectorInfo struct {
	Name, Version string
	Families      []familyInfo
}

type familyInfo struct {
	Name   string
	Type   uint32
	Help   string
	Labels []string
}

// families turns the library's catalogue into the descriptors the relay
// writes with. Names are not checked here: the host's guard drops and
// counts invalid ones, as it does for any plugin. A type the ABI does not
// define cannot be relayed at all and refuses the library.
func (ci collectorInfo) families(path string) ([]*sdk.Desc, error) {
	descs := make([]*sdk.Desc, len(ci.Families))
	for i, f := range ci.Families {
		var typ sdk.Type
		switch f.Type {
		case abiCounter:
			typ = sdk.Counter
		case abiGauge:
			typ = sdk.Gauge
		case abiUntyped:
			typ = sdk.Untyped
		case abiHistogram:
			typ = sdk.Histogram
		default:
			return nil, fmt.Errorf("%s: family %d (%q) has type %d, which collector ABI %d does not define (1 counter, 2 gauge, 3 untyped, 4 histogram)", path, i, f.Name, f.Type, abiVersion)
		}
		descs[i] = sdk.NewDesc(f.Name, typ, f.Help, f.Labels...)
	}
	return descs, nil
}
