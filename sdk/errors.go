package sdk

import (
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
)

var inf = math.Inf(1)

func errUnsupportedType(mf *dto.MetricFamily) error {
	return fmt.Errorf("family %s: unsupported metric type %s", mf.GetName(), mf.GetType())
}
