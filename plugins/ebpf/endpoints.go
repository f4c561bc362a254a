package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// resolveTimeout bounds one endpoint's resolution.
const resolveTimeout = 3 * time.Second

// resolveEndpoint returns an endpoint's addresses: the address itself, or
// at most maxEndpointAddrs of the host name's addresses (sorted, so that
// the same answer keeps the same subset).
func resolveEndpoint(ctx context.Context, r *net.Resolver, endpoint string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(endpoint); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", endpoint)
	if err != nil {
		return nil, fmt.Errorf("resolve object-store endpoint %s: %w", endpoint, err)
	}
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	addrs = slices.Compact(addrs)
	if len(addrs) > maxEndpointAddrs {
		addrs = addrs[:maxEndpointAddrs]
	}
	return addrs, nil
}
