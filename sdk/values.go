package sdk

import "time"

// Bool is 1 for true and 0 for false, the value of a gauge that states a
// condition (nvme_smart_available, rdma_qp_mode{mode}).
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// UnixSeconds is t as seconds since the Unix epoch with its sub-second
// part, the value of a *_timestamp_seconds gauge.
func UnixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
