package main

import "testing"

func TestSeriesLinesAndFamilyCount(t *testing.T) {
	body := []byte(`# HELP rdma_port_rcv_data_total Port received data.
# TYPE rdma_port_rcv_data_total counter
rdma_port_rcv_data_total{device="mlx5_0",port="1"} 1
rdma_port_rcv_data_total{device="mlx5_0",port="2"} 2
# TYPE rdma_port_info gauge
rdma_port_info{device="mlx5_0",port="1"} 1
# TYPE go_goroutines gauge
go_goroutines 12
`)
	for _, c := range []struct {
		prefixes       []string
		series, family int
	}{
		{nil, 4, 0},
		{[]string{"rdma_"}, 3, 2},
		{[]string{"rdma_port_rcv", "go_"}, 3, 2},
		{[]string{"node_"}, 0, 0},
	} {
		if got := seriesLines(body, c.prefixes...); got != c.series {
			t.Errorf("seriesLines(%q) = %d, want %d", c.prefixes, got, c.series)
		}
		if got := familyCount(body, c.prefixes...); got != c.family {
			t.Errorf("familyCount(%q) = %d, want %d", c.prefixes, got, c.family)
		}
	}
}
