package expose

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func checkShortest(t *testing.T, f float64) {
	t.Helper()
	want := strconv.FormatFloat(f, 'g', -1, 64)
	if got := string(appendShortest(nil, f)); got != want {
		t.Fatalf("appendShortest(%v): %q, strconv: %q", f, got, want)
	}
}

// TestAppendShortest compares appendShortest with strconv on the values its
// fast path takes (integers, up to four decimals, both signs, around the
// 'g' layout's switch points and the 10^15 limit) and on values it leaves
// to strconv.
func TestAppendShortest(t *testing.T) {
	for _, f := range []float64{
		0, math.Copysign(0, -1), 1, -1, 0.5, 0.25, 0.1, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.00001, 0.00015,
		9, 10, 99999, 100000, 999999, 1e6, 1000001, 1234567, 1.234567e6, 123456789, 1e14, 1e15 - 1, 1e15, 1e15 + 1,
		99999.9999, 999999.5, 1e21, 1e22, 12.25, 249.75, 3.14159, 2.5e-5, 4503599627370497, 9007199254740993,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 1.7976931348623157e308, 5e-324, 0.3, 0.7, 1.1, 2.675,
	} {
		checkShortest(t, f)
		checkShortest(t, -f)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		// integers of every magnitude up to 2^53
		checkShortest(t, float64(r.Int64N(1<<uint(r.IntN(54)+1))))
		// up to four decimals
		d := pow10s[r.IntN(len(pow10s))]
		checkShortest(t, float64(r.Int64N(1<<uint(r.IntN(50)+1)))/d)
		checkShortest(t, -float64(r.Int64N(1e6))/d)
		// anything
		checkShortest(t, math.Float64frombits(r.Uint64()))
		checkShortest(t, r.Float64()*math.Pow(10, float64(r.IntN(40)-20)))
	}
}

func FuzzAppendShortest(f *testing.F) {
	for _, v := range []float64{0, 1, 0.25, 1e6, 1234567, 1e15, 0.0001, 2.5e-5} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		checkShortest(t, v)
	})
}
