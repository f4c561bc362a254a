package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// A hook is one BPF program and the kernel event it runs on.
type hook struct {
	program string // the function name in the object
	event   string // the tracepoint, also the program label of ebpf_program_loaded
	group   string // the classic tracepoint's group (block, tcp)
	// ret: the program runs at the function's return (fexit, kretprobe);
	// event is then the function, the program label of its entry's hook.
	ret bool
}

// A variant is one way to run a group of programs: all of its hooks load
// and attach in the same mode, or none does. The disk programs are a pair
// because a completion can only be matched to an issue recorded in the same
// mode (request address vs. device+sector).
type variant struct {
	attach string // one of attachOrder
	hooks  []hook
}

// programs are the variant's kernel events or functions, each once (a
// kprobe and its kretprobe are one program of ebpf_program_loaded).
func (v variant) programs() []string {
	var out []string
	for _, h := range v.hooks {
		if !slices.Contains(out, h.event) {
			out = append(out, h.event)
		}
	}
	return out
}

// A probe is a loaded and attached variant: its collection (programs and
// maps) and its links.
type probe struct {
	attach string
	coll   *ebpf.Collection
	links  []io.Closer
}

func (p *probe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.coll.Close()
	return errors.Join(errs...)
}

// programState is one series of ebpf_program_loaded.
type programState struct {
	event, attach string
	loaded        bool
}

// loadVariant loads v's programs out of spec, with only the maps they use,
// and attaches them. Either every hook runs or nothing is left loaded.
func loadVariant(spec *ebpf.CollectionSpec, v variant, tracefs string, opts *ebpf.CollectionOptions) (*probe, error) {
	trimmed := spec.Copy()
	trimmed.Programs = map[string]*ebpf.ProgramSpec{}
	used := map[string]bool{}
	for _, h := range v.hooks {
		ps, ok := spec.Programs[h.program]
		if !ok {
			return nil, fmt.Errorf("program %s is not in the object", h.program)
		}
		trimmed.Programs[h.program] = ps
		for _, ins := range ps.Instructions {
			if ref := ins.Reference(); ref != "" {
				used[ref] = true // a map (or a function, which no map is named after)
			}
		}
	}
	// Maps of the other variant (its start-time table) are not created:
	// LRU maps are preallocated. Data sections (.rodata) stay.
	for name := range trimmed.Maps {
		if !used[name] && !strings.HasPrefix(name, ".") {
			delete(trimmed.Maps, name)
		}
	}
	if opts == nil {
		opts = &ebpf.CollectionOptions{}
	}
	coll, err := ebpf.NewCollectionWithOptions(trimmed, *opts)
	if err != nil {
		return nil, fmt.Errorf("load: %w", describeLoadError(err))
	}
	p := &probe{attach: v.attach, coll: coll}
	for _, h := range v.hooks {
		l, err := attach(v.attach, h, coll.Programs[h.program], tracefs)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %s: %w", h.event, err)
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

func attach(mode string, h hook, prog *ebpf.Program, tracefs string) (io.Closer, error) {
	switch mode {
	case attachTPBTF:
		return link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
	case attachTracepoint:
		l, err := attachTracepointAt(tracefs, h.group, h.event, prog)
		return l, explainPerfDenied(err)
	case attachRawTP:
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.event, Program: prog})
	case attachFentry:
		at := ebpf.AttachTraceFEntry
		if h.ret {
			at = ebpf.AttachTraceFExit
		}
		return link.AttachTracing(link.TracingOptions{Program: prog, AttachType: at})
	case attachKprobe:
		// The perf kprobe PMU when the kernel has it, else tracefs's
		// kprobe_events (cilium/ebpf tries both).
		open := link.Kprobe
		if h.ret {
			open = link.Kretprobe
		}
		l, err := open(h.event, prog, nil)
		return l, explainPerfDenied(err)
	}
	return nil, fmt.Errorf("unknown attach mode %q", mode)
}

// explainPerfDenied says what a denied perf_event_open (classic
// tracepoints and kprobes attach through one) most likely means: Debian's
// and Ubuntu's kernels add a kernel.perf_event_paranoid level 3, their
// default, at which every perf event needs CAP_SYS_ADMIN, CAP_PERFMON not
// sufficing (measured in the lab on Debian 12's 6.1). tp_btf, raw_tp and
// fentry do not open perf events.
func explainPerfDenied(err error) error {
	if err == nil || !errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "open /") {
		return err // not the perf event (a file the sandbox denies names itself)
	}
	return fmt.Errorf("%w (perf_event_open denied: with kernel.perf_event_paranoid above 2, Debian's and Ubuntu's default 3, perf events need CAP_SYS_ADMIN; set it to 2 to let CAP_PERFMON open them, or use a mode without perf events: tp_btf, raw_tp, fentry)", err)
}

// describeLoadError keeps a verifier rejection readable in one log line:
// the error and the verifier log's last lines, which say why.
func describeLoadError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w: verifier: %s", err, strings.Join(tail(ve.Log, 3), " | "))
	}
	return err
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

// loadGroup tries the variants in order and keeps the first that loads and
// attaches. It returns the probe (nil when none ran), the states of every
// hook in every variant for ebpf_program_loaded, and, when none ran, an
// error saying why each variant failed. logf receives one line per variant
// tried.
func loadGroup(group string, spec *ebpf.CollectionSpec, variants []variant, tracefs string, opts *ebpf.CollectionOptions, logf func(msg string, args ...any)) (*probe, []programState, error) {
	return tryVariants(group, variants, func(v variant) (*probe, error) { return loadVariant(spec, v, tracefs, opts) }, logf)
}

// tryVariants is loadGroup's order and bookkeeping, with load doing the
// loading (a test's failures injected there).
func tryVariants(group string, variants []variant, load func(variant) (*probe, error), logf func(msg string, args ...any)) (*probe, []programState, error) {
	var (
		running *probe
		states  []programState
		errs    []string
	)
	for _, v := range variants {
		if running == nil {
			p, err := load(v)
			if err != nil {
				logf("ebpf programs not running in this mode", "group", group, "attach", v.attach, "programs", events(v), "error", err.Error())
				errs = append(errs, fmt.Sprintf("%s: %v", v.attach, err))
			} else {
				logf("ebpf programs running", "group", group, "attach", v.attach, "programs", events(v))
				running = p
				for _, e := range v.programs() {
					states = append(states, programState{event: e, attach: v.attach, loaded: true})
				}
				continue
			}
		}
		for _, e := range v.programs() {
			states = append(states, programState{event: e, attach: v.attach})
		}
	}
	if running == nil {
		return nil, states, fmt.Errorf("%s programs not running: %s", group, strings.Join(errs, "; "))
	}
	return running, states, nil
}

func events(v variant) string { return strings.Join(v.programs(), ",") }
