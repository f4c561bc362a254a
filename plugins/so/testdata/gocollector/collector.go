// Command gocollector is a plexporter shared-object collector written in
// Go, built with -buildmode=c-shared: the ABI of sdk/cabi from a second
// toolchain. It reports its own Go runtime (goroutines, collects) and the
// label its settings name ({"label": "<value>"}). exports.go holds the
// five exported functions; this file the C side they need.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../sdk/cabi
#define PLEXPORTER_COLLECTOR_NO_PROTOTYPES
#include <stdlib.h>
#include "plexporter_collector.h"

static const char *const echo_labels[] = {"label"};
static const struct plexporter_family families[] = {
	{"gocollector_goroutines", PLEXPORTER_GAUGE, "Goroutines of the collector's own Go runtime.", NULL, 0},
	{"gocollector_collects_total", PLEXPORTER_COUNTER, "Collects so far.", NULL, 0},
	{"gocollector_info", PLEXPORTER_GAUGE, "The label the collector's settings name.", echo_labels, 1},
};
static const struct plexporter_collector_info info = {"gocollector", "1.0.0", families, 3};

static const struct plexporter_collector_info *get_info(void) { return &info; }

// The emitter's functions are C function pointers, which Go cannot call.
static int emit_sample(const struct plexporter_emitter *e, void *ctx, uint32_t family,
                       const char *const *lv, uint32_t n, double value) {
	return e->sample(ctx, family, lv, n, value);
}
static void emit_error(const struct plexporter_emitter *e, void *ctx, const char *msg) {
	e->error(ctx, msg);
}
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"runtime"
	"unsafe"
)

const (
	famGoroutines = iota
	famCollects
	famInfo
)

var (
	label    = "none"
	collects float64
	cLabel   = C.CString(label)
)

func configure(config string) error {
	var c struct {
		Label string `json:"label"`
	}
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return fmt.Errorf("gocollector settings: %w", err)
	}
	if c.Label != "" {
		label = c.Label
		C.free(unsafe.Pointer(cLabel))
		cLabel = C.CString(label)
	}
	return nil
}

func collect(e *C.struct_plexporter_emitter, ctx unsafe.Pointer) C.int {
	if C.emit_sample(e, ctx, famGoroutines, nil, 0, C.double(runtime.NumGoroutine())) == C.PLEXPORTER_EMIT_STOP {
		return 1
	}
	collects++
	C.emit_sample(e, ctx, famCollects, nil, 0, C.double(collects))
	lv := (**C.char)(C.malloc(C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(lv))
	*lv = cLabel
	C.emit_sample(e, ctx, famInfo, lv, 1, 1)
	return 0
}

func info() *C.struct_plexporter_collector_info { return C.get_info() }

func main() {} // required by -buildmode=c-shared, never run
