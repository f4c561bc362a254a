package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// setKprobeKernelVersion gives spec's kprobe programs the running
// kernel's version code. Kernels before 5.0 refuse a kprobe program whose
// version is not theirs; when none is set, cilium/ebpf reads it from the
// vDSO through /proc/self/mem, which the sandbox does not grant (the kprobe
// mode failed so on Linux 6.1 in the lab). Kernels since 5.0 ignore the
// field, and the CO-RE programs need BTF, which kernels before 5.0 rarely
// have, so uname's release (whose patch level a distribution may replace)
// is close enough.
func setKprobeKernelVersion(spec *ebpf.CollectionSpec) error {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	code, err := kernelVersionCode(unix.ByteSliceToString(uts.Release[:]))
	if err != nil {
		return err
	}
	for _, p := range spec.Programs {
		if p.Type == ebpf.Kprobe {
			p.KernelVersion = code
		}
	}
	return nil
}

// kernelVersionCode is the KERNEL_VERSION(a, b, c) code of a kernel
// release such as "6.1.0-57-amd64" or "5.15.153.1-microsoft-standard".
func kernelVersionCode(release string) (uint32, error) {
	fields := strings.FieldsFunc(release, func(r rune) bool { return r < '0' || r > '9' })
	if len(fields) < 2 || !strings.HasPrefix(release, fields[0]) {
		return 0, fmt.Errorf("kernel release %q: no major.minor version", release)
	}
	var v [3]uint64
	for i := 0; i < 3 && i < len(fields); i++ {
		n, err := strconv.ParseUint(fields[i], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("kernel release %q: %w", release, err)
		}
		v[i] = n
	}
	if v[0] > 255 || v[1] > 255 {
		return 0, fmt.Errorf("kernel release %q: version out of range", release)
	}
	return uint32(v[0]<<16 | v[1]<<8 | min(v[2], 255)), nil
}
