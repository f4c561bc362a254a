package main

/*
#define PLEXPORTER_COLLECTOR_NO_PROTOTYPES
#include <stdlib.h>
#include "plexporter_collector.h"
*/
import "C"

import "unsafe"

//export plexporter_collector_abi_version
func plexporter_collector_abi_version() C.uint32_t { return C.PLEXPORTER_COLLECTOR_ABI_VERSION }

//export plexporter_collector_info
func plexporter_collector_info() *C.struct_plexporter_collector_info { return info() }

//export plexporter_collector_configure
func plexporter_collector_configure(config *C.char, errOut **C.char) C.int {
	if err := configure(C.GoString(config)); err != nil {
		*errOut = C.CString(err.Error()) // freed by plexporter_collector_free
		return 1
	}
	return 0
}

//export plexporter_collector_collect
func plexporter_collector_collect(emit *C.struct_plexporter_emitter, ctx unsafe.Pointer, deadline C.int64_t) C.int {
	return collect(emit, ctx)
}

//export plexporter_collector_free
func plexporter_collector_free(p unsafe.Pointer) { C.free(p) }
