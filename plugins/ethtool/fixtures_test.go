package main

import (
	"context"
	"os"
	"testing"
)

// fakeSource serves fixture tables behind the interface the ioctl source
// implements. Netdevs it does not know have no statistics (like a bridge).
type fakeSource struct {
	tables map[string]*driverStats
	errs   map[string]error
	calls  map[string]int
}

func newFakeSource(t testing.TB, files map[string]string) *fakeSource {
	t.Helper()
	f := &fakeSource{tables: map[string]*driverStats{}, errs: map[string]error{}, calls: map[string]int{}}
	for netdev, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := parseEthtoolText(string(b))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		f.tables[netdev] = st
	}
	return f
}

func (f *fakeSource) DriverStats(_ context.Context, netdev string) (*driverStats, error) {
	f.calls[netdev]++
	if err := f.errs[netdev]; err != nil {
		return nil, err
	}
	st, ok := f.tables[netdev]
	if !ok {
		return nil, errNoStats
	}
	return st, nil
}

func TestParseEthtoolText(t *testing.T) {
	st, err := parseEthtoolText("NIC statistics:\n     rx_prio3_pause: 1823104\n     [0]: rx_ucast_packets: 7\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Names) != 2 || st.Names[0] != "rx_prio3_pause" || st.Values[0] != 1823104 || st.Names[1] != "[0]: rx_ucast_packets" || st.Values[1] != 7 {
		t.Fatalf("got %+v", st)
	}
	if _, err := parseEthtoolText("     rx: -1\n"); err == nil {
		t.Fatal("negative value accepted")
	}
}
