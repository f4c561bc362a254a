//go:build cgo

package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../sdk/cabi
#cgo linux LDFLAGS: -ldl -lpthread
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "plexporter_collector.h"
#include "stage.h"

// The Go exports of emit.go (cgo generates their prototypes without const).
extern int soEmitSample(struct so_stage *s, uint32_t family, char **lv, uint32_t n, double value);
extern int soEmitHistogram(struct so_stage *s, uint32_t family, char **lv, uint32_t n, double *bounds,
                           uint64_t *cumulative, uint32_t nb, uint64_t count, double sum);
extern void soEmitError(struct so_stage *s, char *msg);
extern void soStageFlush(struct so_stage *s);
extern void soLibraryThread(uintptr_t lib);

// Address space, not memory: RLIMIT_DATA counts every thread's whole stack,
// and glibc gives each one RLIMIT_STACK (8 MiB) by default. The Go runtime's
// threads run Go code on goroutine stacks and need little of theirs, so the
// default shrinks before the runtime starts any (a constructor runs before
// the Go runtime does); the library's thread is made with a full stack.
#define SO_RUNTIME_THREAD_STACK (256 << 10)
#define SO_LIBRARY_THREAD_STACK (8 << 20)

#ifdef __GLIBC__
__attribute__((constructor)) static void so_small_thread_stacks(void) {
	pthread_attr_t a;
	if (pthread_attr_init(&a) != 0)
		return;
	if (pthread_attr_setstacksize(&a, SO_RUNTIME_THREAD_STACK) == 0)
		pthread_setattr_default_np(&a);
	pthread_attr_destroy(&a);
}
#endif

static void *so_library_thread(void *lib) {
	soLibraryThread((uintptr_t)lib);
	return NULL;
}

// so_start_library_thread starts the thread every call into the library
// runs on: a C thread, so that its stack size is the library's to choose.
static int so_start_library_thread(uintptr_t lib) {
	pthread_attr_t a;
	pthread_t t;
	int rc = pthread_attr_init(&a);
	if (rc != 0)
		return rc;
	pthread_attr_setstacksize(&a, SO_LIBRARY_THREAD_STACK);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &a, so_library_thread, (void *)lib);
	pthread_attr_destroy(&a);
	return rc;
}

typedef uint32_t (*so_abi_fn)(void);
typedef const struct plexporter_collector_info *(*so_info_fn)(void);
typedef int (*so_configure_fn)(const char *, char **);
typedef int (*so_collect_fn)(const struct plexporter_emitter *, void *, int64_t);
typedef void (*so_free_fn)(void *);

static uint32_t so_call_abi(void *f) { return ((so_abi_fn)f)(); }
static const struct plexporter_collector_info *so_call_info(void *f) { return ((so_info_fn)f)(); }
static int so_call_configure(void *f, const char *json, char **err) { return ((so_configure_fn)f)(json, err); }
static void so_call_free(void *f, void *p) { ((so_free_fn)f)(p); }

// The emitter's functions. sample() stages what the catalogue admits
// (stage.h) and calls into Go only when the stage is full; everything else
// (a refusal, a stopped collect, another thread, histograms, errors) takes
// the direct path into Go, which drains the stage first, so the Writer sees
// every sample in the order it was emitted and each refusal is answered,
// and counted, by the same Go code as before.
static int so_emit_sample(void *ctx, uint32_t family, const char *const *lv, uint32_t n, double value) {
	struct so_stage *s = ctx;
	if (n > 64 || __atomic_load_n(&s->stopped, __ATOMIC_ACQUIRE) || !pthread_equal(pthread_self(), s->thread) ||
	    family >= s->n_families || s->kind[family] != n || (n > 0 && lv == NULL))
		return soEmitSample(s, family, (char **)lv, n, value);
	uint32_t len[64]; // n <= maxLabels: kind[] holds nothing larger
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		size_t l = lv[i] ? strlen(lv[i]) : 0;
		if (l > SO_STAGE_BYTES)
			return soEmitSample(s, family, (char **)lv, n, value);
		len[i] = (uint32_t)l;
		total += l;
	}
	if (total > SO_STAGE_BYTES)
		return soEmitSample(s, family, (char **)lv, n, value);
	if (s->n == SO_STAGE_SAMPLES || s->nlens + n > SO_STAGE_LABELS || s->nbytes + total > SO_STAGE_BYTES) {
		soStageFlush(s);
		if (__atomic_load_n(&s->stopped, __ATOMIC_ACQUIRE))
			return soEmitSample(s, family, (char **)lv, n, value);
	}
	for (uint32_t i = 0; i < n; i++) {
		memcpy(s->bytes + s->nbytes, lv[i] ? lv[i] : "", len[i]);
		s->nbytes += len[i];
		s->lens[s->nlens++] = len[i];
	}
	struct so_entry *e = &s->entries[s->n];
	e->family = family;
	e->lens_end = s->nlens;
	e->bytes_end = s->nbytes;
	e->value = value;
	__atomic_store_n(&s->n, s->n + 1, __ATOMIC_RELEASE);
	return PLEXPORTER_EMIT_OK;
}
static int so_emit_histogram(void *ctx, uint32_t family, const char *const *lv, uint32_t n,
                             const double *bounds, const uint64_t *cumulative, uint32_t nb,
                             uint64_t count, double sum) {
	return soEmitHistogram(ctx, family, (char **)lv, n, (double *)bounds, (uint64_t *)cumulative, nb, count, sum);
}
static void so_emit_error(void *ctx, const char *msg) { soEmitError(ctx, (char *)msg); }

static const struct plexporter_emitter so_emitter = {
	PLEXPORTER_COLLECTOR_ABI_VERSION, so_emit_sample, so_emit_histogram, so_emit_error,
};

// so_call_collect runs a collect with s, emptied, as the emitter's ctx.
static int so_call_collect(void *f, struct so_stage *s, int64_t deadline) {
	s->thread = pthread_self();
	return ((so_collect_fn)f)(&so_emitter, s, deadline);
}

static struct so_stage *so_new_stage(void) { return calloc(1, sizeof(struct so_stage)); }

// Label name i of a family, or NULL when the family has no array of them.
static const char *so_label(const struct plexporter_family *f, uint32_t i) {
	return f->label_names ? f->label_names[i] : NULL;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk"
)

// dlLibrary is a shared object loaded with dlopen. Every call into it runs
// on one OS thread for the life of the process (the ABI promises collectors
// the same thread every time, never two calls at once): a C thread with an
// 8 MiB stack that calls into Go once and serves calls from there on.
type dlLibrary struct {
	path                                string
	abi, info, configure, collect, free unsafe.Pointer
	calls                               chan func()
	desc                                collectorInfo
	stage                               *cStage // the emitter's, made for the first relay
}

// openLibrary loads the collector at path and checks its ABI version.
func openLibrary(path string) (library, error) {
	l := &dlLibrary{path: path, calls: make(chan func())}
	// The handle is never deleted: the thread serves l until the process exits.
	if rc := C.so_start_library_thread(C.uintptr_t(cgo.NewHandle(l))); rc != 0 {
		return nil, fmt.Errorf("start the library's thread: %w", syscall.Errno(rc))
	}
	var err error
	l.do(func() { err = l.load() })
	if err != nil {
		close(l.calls) // the thread returns from its callback and exits
		return nil, err
	}
	return l, nil
}

// do runs f on the library's thread and waits for it.
func (l *dlLibrary) do(f func()) {
	done := make(chan struct{})
	l.calls <- func() { f(); close(done) }
	<-done
}

func (l *dlLibrary) load() (err error) {
	cpath := C.CString(l.path)
	defer C.free(unsafe.Pointer(cpath))
	// RTLD_NOW: an unresolved symbol fails here, with the loader's
	// message, instead of killing a collect later.
	h := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL)
	if h == nil {
		msg := C.GoString(C.dlerror())
		if strings.Contains(msg, "Permission denied") {
			msg += " (under the sandbox the library's directory must be granted in the manifest's paths.read_only)"
		}
		return fmt.Errorf("dlopen: %s", msg)
	}
	defer func() {
		if err != nil {
			C.dlclose(h) // not a collector this process can use
		}
	}()
	for _, s := range []struct {
		name string
		to   *unsafe.Pointer
	}{
		{"plexporter_collector_abi_version", &l.abi},
		{"plexporter_collector_info", &l.info},
		{"plexporter_collector_configure", &l.configure},
		{"plexporter_collector_collect", &l.collect},
		{"plexporter_collector_free", &l.free},
	} {
		name := C.CString(s.name)
		*s.to = C.dlsym(h, name)
		C.free(unsafe.Pointer(name))
		if *s.to == nil {
			return fmt.Errorf("%s does not export %s, so it is not a plexporter collector (sdk/cabi/plexporter_collector.h)", l.path, s.name)
		}
	}
	if v := uint32(C.so_call_abi(l.abi)); v != abiVersion {
		return fmt.Errorf("%s was built against collector ABI %d, and this plexporter-so loads ABI %d only: rebuild it against the plexporter_collector.h of this release", l.path, v, abiVersion)
	}
	info := C.so_call_info(l.info)
	if info == nil {
		return fmt.Errorf("%s: plexporter_collector_info returned NULL", l.path)
	}
	desc, err := copyInfo(info)
	if err != nil {
		return fmt.Errorf("%s: plexporter_collector_info: %w", l.path, err)
	}
	l.desc = desc
	return nil
}

// copyInfo copies the library's catalogue into Go memory, refusing what a
// well-formed one cannot be.
func copyInfo(ci *C.struct_plexporter_collector_info) (collectorInfo, error) {
	if ci.name == nil || C.GoString(ci.name) == "" {
		return collectorInfo{}, errors.New("no collector name")
	}
	out := collectorInfo{Name: C.GoString(ci.name), Version: goStringOrEmpty(ci.version)}
	n := int(ci.n_families)
	if n > maxFamilies {
		return collectorInfo{}, fmt.Errorf("%d families, more than %d", n, maxFamilies)
	}
	if n > 0 && ci.families == nil {
		return collectorInfo{}, fmt.Errorf("%d families but no family array", n)
	}
	fams := unsafe.Slice(ci.families, n)
	for i := range fams {
		f := &fams[i]
		if f.name == nil {
			return collectorInfo{}, fmt.Errorf("family %d has no name", i)
		}
		if f.n_labels > maxLabels {
			return collectorInfo{}, fmt.Errorf("family %d (%s) has %d labels, more than %d", i, C.GoString(f.name), f.n_labels, maxLabels)
		}
		fi := familyInfo{Name: C.GoString(f.name), Type: uint32(f._type), Help: goStringOrEmpty(f.help)}
		for j := C.uint32_t(0); j < f.n_labels; j++ {
			l := C.so_label(f, j)
			if l == nil {
				return collectorInfo{}, fmt.Errorf("family %d (%s): label name %d is NULL", i, fi.Name, j)
			}
			fi.Labels = append(fi.Labels, C.GoString(l))
		}
		out.Families = append(out.Families, fi)
	}
	return out, nil
}

func goStringOrEmpty(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

func (l *dlLibrary) Path() string        { return l.path }
func (l *dlLibrary) Info() collectorInfo { return l.desc }

func (l *dlLibrary) Configure(json string) error {
	var rc C.int
	var msg string
	l.do(func() {
		cjson := C.CString(json)
		defer C.free(unsafe.Pointer(cjson))
		var cerr *C.char
		rc = C.so_call_configure(l.configure, cjson, &cerr)
		if cerr != nil {
			msg = C.GoString(cerr)
			C.so_call_free(l.free, unsafe.Pointer(cerr))
		}
	})
	if rc == 0 {
		return nil
	}
	if msg == "" {
		msg = fmt.Sprintf("plexporter_collector_configure returned %d without a message", rc)
	}
	return errors.New(msg)
}

// Collect calls the library's collect with a CLOCK_MONOTONIC deadline and
// r's stage behind the emitter's ctx, and drains the stage whenever the
// emitter fills it and once collect returns.
func (l *dlLibrary) Collect(r *relay, deadline time.Time) error {
	st := l.stageFor(r)
	var rc C.int
	done := make(chan struct{})
	l.calls <- func() {
		rc = C.so_call_collect(l.collect, st.c, C.int64_t(monotonic(deadline)))
		close(done)
	}
	for waiting := true; waiting; {
		select {
		case <-st.full:
			st.empty()
			st.emptied <- struct{}{}
		case <-done:
			st.empty()
			waiting = false
		}
	}
	if rc != 0 {
		return fmt.Errorf("collect failed (plexporter_collector_collect returned %d)", rc)
	}
	return nil
}

// stageFor returns the stage the emitter fills for r, made on r's first
// collect; the plugin has one relay for the life of the process. A stage
// is never freed: a collect the plugin gave up on may still be writing it.
func (l *dlLibrary) stageFor(r *relay) *cStage {
	if l.stage != nil && l.stage.r == r {
		return l.stage
	}
	c := C.so_new_stage()
	if c == nil {
		panic("plexporter-so: out of memory for the emitter's stage")
	}
	c.relay = C.uintptr_t(cgo.NewHandle(r))
	c.n_families = C.uint32_t(len(r.descs))
	for i, d := range r.descs {
		c.kind[i] = C.SO_STAGE_NOT_VALUE
		if d.Type != sdk.Histogram {
			c.kind[i] = C.uint8_t(len(d.Labels))
		}
	}
	l.stage = &cStage{c: c, r: r, full: make(chan struct{}), emptied: make(chan struct{})}
	r.mu.Lock()
	r.stage = l.stage
	r.mu.Unlock()
	return l.stage
}

// monotonic converts a wall-clock deadline to CLOCK_MONOTONIC nanoseconds,
// the collector's clock.
func monotonic(t time.Time) int64 {
	var now unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	return now.Nano() + int64(time.Until(t))
}
