package expose

import (
	"math"
	"strconv"
)

// pow10s are the scales appendShortest tries: a value with at most four
// decimals (a counter, a count, a gauge in quarters or percent) is written
// from an integer.
var pow10s = [...]float64{1, 10, 100, 1000, 10000}

// appendShortest appends f as strconv.AppendFloat(b, f, 'g', -1, 64) does,
// byte for byte, for finite f. Values with at most four decimals and at
// most 15 significant digits — counters and counts, most gauges — are
// written from their digits as an integer, which is several times cheaper
// than the shortest-representation search; every other value goes to
// strconv.
//
// Why it is exact: if m = f×10^d is an integer below 10^15 and m/10^d
// rounds back to f, the decimal m×10^-d reads back as f (parsing and the
// division both round the same exact quotient), and no other decimal of
// at most 15 significant digits reads back as f (a float64 tells all of
// them apart), so m's digits without trailing zeros are the shortest
// representation. They are then laid out as 'g' lays them out: %e for
// exponents below -4 or from 6 (the shortest form's precision) up, %f
// otherwise. FuzzAppendShortest and TestAppendShortest compare it with
// strconv.
func appendShortest(b []byte, f float64) []byte {
	for d, p := range pow10s {
		m := f * p
		if m != math.Trunc(m) || m >= 1e15 || m <= -1e15 {
			continue
		}
		if m/p != f {
			continue // scaled with a rounding
		}
		if m == 0 && math.Signbit(f) {
			return append(b, '-', '0')
		}
		return appendDecimal(b, m, d)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendDecimal lays out the decimal m×10^-d (m integral, |m| < 10^15) in
// 'g' format's shortest form.
func appendDecimal(b []byte, m float64, d int) []byte {
	if m == 0 {
		return append(b, '0')
	}
	if m < 0 {
		b = append(b, '-')
		m = -m
	}
	if d == 0 && m < 1e6 {
		return strconv.AppendUint(b, uint64(m), 10) // %f without a fraction
	}
	var digs [24]byte
	ds := strconv.AppendUint(digs[:0], uint64(m), 10)
	dp := len(ds) - d // decimal point position, as strconv's decimal
	for len(ds) > 1 && ds[len(ds)-1] == '0' {
		ds = ds[:len(ds)-1]
	}
	nd := len(ds)
	if exp := dp - 1; exp < -4 || exp >= 6 {
		b = append(b, ds[0])
		if nd > 1 {
			b = append(b, '.')
			b = append(b, ds[1:]...)
		}
		b = append(b, 'e')
		if exp < 0 {
			b = append(b, '-')
			exp = -exp
		} else {
			b = append(b, '+')
		}
		if exp < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, int64(exp), 10)
	}
	switch {
	case dp <= 0:
		b = append(b, '0', '.')
		for range -dp {
			b = append(b, '0')
		}
		return append(b, ds...)
	case dp >= nd:
		b = append(b, ds...)
		for range dp - nd {
			b = append(b, '0')
		}
		return b
	default:
		b = append(b, ds[:dp]...)
		b = append(b, '.')
		return append(b, ds[dp:]...)
	}
}
