package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// The generic netlink source builds on every GOOS: genetlink.Dial fails at
// run time where there is no netlink, which the plugin reports like any
// failed read. So it needs no _linux/_other split, and its fake-kernel tests
// run on a developer's laptop too. Errnos come from package syscall, which
// has them on every GOOS.

// genlSource reads ETHTOOL_MSG_STATS_GET, ETHTOOL_MSG_PAUSE_GET and
// ETHTOOL_MSG_FEC_GET (the latter two with ETHTOOL_FLAG_STATS) over a generic
// netlink socket. These GET requests need no capability.
type genlSource struct {
	mu     sync.Mutex
	dial   func() (*genetlink.Conn, error)
	c      *genetlink.Conn
	family genetlink.Family
	// absent is set when the kernel has no "ethtool" family (before 5.6,
	// or CONFIG_ETHTOOL_NETLINK off): nothing to read, for good.
	absent bool
	// requests counts messages sent (tests and measurements).
	requests int

	// unsupported is when each (netdev, part) the driver lacks was last
	// asked: the kernel answers EOPNOTSUPP when the driver has no such
	// ethtool operation (pause and FEC on veth, virtio_net, IPoIB), which
	// it cannot gain while the netdev exists, so the part is not asked
	// again before unsupportedRecheck has passed — two of the three
	// requests per scrape for such a netdev (docs/performance.md, scenario
	// 7). The recheck bounds what the cache can miss: a driver that
	// answers EOPNOTSUPP for a while (a firmware capability still being
	// probed), or another netdev under a name that went away.
	unsupported map[unsupportedKey]time.Time
	lastSweep   time.Time
	now         func() time.Time
}

// unsupportedRecheck is how long a part a driver answered EOPNOTSUPP for
// is not asked again.
const unsupportedRecheck = 5 * time.Minute

type unsupportedKey struct {
	netdev string
	cmd    uint8
}

// knownUnsupported reports whether part cmd of netdev was answered
// EOPNOTSUPP less than unsupportedRecheck ago, and forgets the answers
// that are older (once per recheck period, so the set is bounded by the
// netdevs seen in one).
func (s *genlSource) knownUnsupported(netdev string, cmd uint8, now time.Time) bool {
	if now.Sub(s.lastSweep) >= unsupportedRecheck {
		for k, at := range s.unsupported {
			if now.Sub(at) >= unsupportedRecheck {
				delete(s.unsupported, k)
			}
		}
		s.lastSweep = now
	}
	at, ok := s.unsupported[unsupportedKey{netdev, cmd}]
	return ok && now.Sub(at) < unsupportedRecheck
}

// newGenlSource dials a generic netlink socket in the caller's network
// namespace on first use.
func newGenlSource() *genlSource {
	return newGenlSourceDial(func() (*genetlink.Conn, error) { return genetlink.Dial(nil) })
}

// newGenlSourceDial uses dial for every (re)connection: tests pass a fake
// connection, the real-kernel test a socket in its namespace.
func newGenlSourceDial(dial func() (*genetlink.Conn, error)) *genlSource {
	return &genlSource{dial: dial, unsupported: map[unsupportedKey]time.Time{}, now: time.Now}
}

func (s *genlSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reset()
}

func (s *genlSource) reset() error {
	if s.c == nil {
		return nil
	}
	err := s.c.Close()
	s.c, s.family = nil, genetlink.Family{}
	return err
}

func (s *genlSource) conn() (*genetlink.Conn, error) {
	if s.c != nil {
		return s.c, nil
	}
	c, err := s.dial()
	if err != nil {
		return nil, fmt.Errorf("generic netlink: %w", err)
	}
	f, err := c.GetFamily(ethtoolGenlName)
	if err != nil {
		c.Close()
		if errors.Is(err, syscall.ENOENT) {
			s.absent = true
			return nil, errNoStats
		}
		return nil, fmt.Errorf("generic netlink family %q: %w", ethtoolGenlName, err)
	}
	s.c, s.family = c, f
	return c, nil
}

func (s *genlSource) StandardStats(ctx context.Context, netdev string, req stdRequest) (*stdStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.absent {
		return nil, errNoStats
	}
	c, err := s.conn()
	if err != nil {
		return nil, err
	}
	// The scrape's deadline bounds every request (zero: none). Best
	// effort: only the in-memory test connection cannot set one.
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	st := &stdStats{}
	type part struct {
		on          bool
		name        string
		cmd, reply  uint8
		attrs       func(*netlink.AttributeEncoder)
		decode      func([]byte, *stdStats) error
		headerAttr  uint16
		headerFlags uint32
	}
	parts := []part{
		{on: req.Groups != 0, name: "ETHTOOL_MSG_STATS_GET", cmd: msgStatsGet, reply: msgStatsGetReply, headerAttr: aStatsHeader,
			attrs: func(ae *netlink.AttributeEncoder) {
				ae.Nested(aStatsGroups, func(b *netlink.AttributeEncoder) error {
					b.Flag(aBitsetNomask, true)
					b.Uint32(aBitsetSize, stdGroupsKnown)
					v := make([]byte, 4)
					binary.NativeEndian.PutUint32(v, req.Groups&stdGroupsAllSet)
					b.Bytes(aBitsetValue, v)
					return nil
				})
			},
			decode: decodeStatsReply},
		{on: req.Pause, name: "ETHTOOL_MSG_PAUSE_GET", cmd: msgPauseGet, reply: msgPauseGetReply, headerAttr: aPauseHeader,
			headerFlags: flagStats, decode: decodePauseReply},
		{on: req.FEC, name: "ETHTOOL_MSG_FEC_GET", cmd: msgFECGet, reply: msgFECGetReply, headerAttr: aFECHeader,
			headerFlags: flagStats | flagCompactBitsets, decode: decodeFECReply},
	}
	now := s.now()
	for _, p := range parts {
		if !p.on || s.knownUnsupported(netdev, p.cmd, now) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ae := netlink.NewAttributeEncoder()
		ae.Nested(p.headerAttr, func(h *netlink.AttributeEncoder) error {
			h.String(aHeaderDevName, netdev)
			if p.headerFlags != 0 {
				h.Uint32(aHeaderFlags, p.headerFlags)
			}
			return nil
		})
		if p.attrs != nil {
			p.attrs(ae)
		}
		body, err := ae.Encode()
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode: %w", p.name, netdev, err)
		}
		s.requests++
		msgs, err := c.Execute(genetlink.Message{
			Header: genetlink.Header{Command: p.cmd, Version: s.family.Version},
			Data:   body,
		}, s.family.ID, netlink.Request)
		if errors.Is(err, syscall.EOPNOTSUPP) {
			s.unsupported[unsupportedKey{netdev, p.cmd}] = now
			continue // the driver lacks this part: no series
		}
		if err != nil {
			var errno syscall.Errno
			if !errors.As(err, &errno) {
				// Not the kernel's answer (a timeout, a short read): the
				// socket may still hold a late reply, start afresh.
				s.reset()
			}
			return nil, fmt.Errorf("%s %s: %w", p.name, netdev, err)
		}
		for _, m := range msgs {
			if m.Header.Command != p.reply {
				continue
			}
			if err := p.decode(m.Data, st); err != nil {
				return nil, fmt.Errorf("%s %s: %w", p.name, netdev, err)
			}
		}
	}
	return st, nil
}

var _ stdSource = (*genlSource)(nil)
