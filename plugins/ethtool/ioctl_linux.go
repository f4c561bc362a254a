package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctlSource reads driver statistics with the SIOCETHTOOL ioctl:
// ETHTOOL_GDRVINFO, ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, ETHTOOL_GSTATS.
// The ioctl needs no capability for these read-only commands.
//
// The string table is cached per netdev and fetched again only when the
// netdev's ifindex, driver or statistic count changes (a re-created netdev,
// a driver rebind, a channel-count change), so a scrape costs four cheap
// ioctls instead of copying hundreds of 32-byte names.
type ioctlSource struct {
	mu    sync.Mutex
	fd    int
	open  func() (int, error)
	cache map[string]*stringTable
	// stringFetches counts ETHTOOL_GSTRINGS calls (tests assert the cache).
	stringFetches int
}

type stringTable struct {
	ifindex int32
	driver  string
	names   []string
}

// newIoctlSource returns a source that opens an AF_UNIX stream socket in
// the caller's network namespace on first use. Any socket whose family does
// not claim SIOCETHTOOL hands it to the network device layer, and a unix
// socket is one the sandbox allows without a network grant (an inet socket
// would need one).
func newIoctlSource() *ioctlSource {
	return &ioctlSource{fd: -1, cache: map[string]*stringTable{}, open: func() (int, error) {
		return unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	}}
}

func (s *ioctlSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// ifreqData is struct ifreq with ifr_data set: 16 bytes of name, then the
// union (24 bytes on 64-bit) whose first word is the pointer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

func (s *ioctlSource) ethtool(netdev string, data unsafe.Pointer) error {
	var ifr ifreqData
	if len(netdev) >= unix.IFNAMSIZ {
		return fmt.Errorf("netdev name %q too long", netdev)
	}
	copy(ifr.name[:], netdev)
	ifr.data = data
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	return nil
}

// ssetInfo is struct ethtool_sset_info asking for one string set.
type ssetInfo struct {
	cmd      uint32
	reserved uint32
	mask     uint64
	data     [1]uint32
}

const ethSSStats = 1 // ETH_SS_STATS

func (s *ioctlSource) DriverStats(ctx context.Context, netdev string) (*driverStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		fd, err := s.open()
		if err != nil {
			return nil, fmt.Errorf("ethtool socket: %w", err)
		}
		s.fd = fd
	}
	ifr, err := unix.NewIfreq(netdev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", netdev, err)
	}
	if err := unix.IoctlIfreq(s.fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return nil, fmt.Errorf("%s: SIOCGIFINDEX: %w", netdev, err)
	}
	ifindex := int32(ifr.Uint32())

	drv := unix.EthtoolDrvinfo{Cmd: unix.ETHTOOL_GDRVINFO}
	if err := s.ethtool(netdev, unsafe.Pointer(&drv)); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, errNoStats
		}
		return nil, fmt.Errorf("%s: ETHTOOL_GDRVINFO: %w", netdev, err)
	}
	driver := unix.ByteSliceToString(drv.Driver[:])

	count := drv.N_stats
	ss := ssetInfo{cmd: unix.ETHTOOL_GSSET_INFO, mask: 1 << ethSSStats}
	switch err := s.ethtool(netdev, unsafe.Pointer(&ss)); {
	case err == nil:
		if ss.mask&(1<<ethSSStats) == 0 {
			return nil, errNoStats
		}
		count = ss.data[0]
	case errors.Is(err, unix.EOPNOTSUPP):
		// Old kernels without GSSET_INFO: drvinfo's n_stats is the count.
	default:
		return nil, fmt.Errorf("%s: ETHTOOL_GSSET_INFO: %w", netdev, err)
	}
	if count == 0 {
		return nil, errNoStats
	}

	tab := s.cache[netdev]
	if tab == nil || tab.ifindex != ifindex || tab.driver != driver || uint32(len(tab.names)) != count {
		buf := make([]byte, 12+int(count)*ethGStringLen)
		binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTRINGS)
		binary.NativeEndian.PutUint32(buf[4:], ethSSStats)
		binary.NativeEndian.PutUint32(buf[8:], count)
		s.stringFetches++
		if err := s.ethtool(netdev, unsafe.Pointer(&buf[0])); err != nil {
			delete(s.cache, netdev)
			return nil, fmt.Errorf("%s: ETHTOOL_GSTRINGS: %w", netdev, err)
		}
		names, err := decodeGStrings(buf)
		if err != nil {
			delete(s.cache, netdev)
			return nil, fmt.Errorf("%s: %w", netdev, err)
		}
		tab = &stringTable{ifindex: ifindex, driver: driver, names: names}
		s.cache[netdev] = tab
	}

	// The kernel writes as many values as the driver counts *now*; if the
	// count grew since GSSET_INFO it would write past a tight buffer, so the
	// buffer has room for twice the count and the reply's n_stats is checked.
	buf := make([]byte, 8+2*int(count)*8)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTATS)
	binary.NativeEndian.PutUint32(buf[4:], count)
	if err := s.ethtool(netdev, unsafe.Pointer(&buf[0])); err != nil {
		return nil, fmt.Errorf("%s: ETHTOOL_GSTATS: %w", netdev, err)
	}
	vals, err := decodeGStats(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", netdev, err)
	}
	if len(vals) != len(tab.names) {
		delete(s.cache, netdev)
		return nil, fmt.Errorf("%s: statistic count changed during the read (%d names, %d values); retried next scrape", netdev, len(tab.names), len(vals))
	}
	return &driverStats{Driver: driver, Names: tab.names, Values: vals}, nil
}
