package main

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"
)

func readBin(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func u(lo uint64) uint128 { return uint128{Lo: lo} }

// The expected values are typed in by hand (testdata/README.md lists them
// per file), not produced by the decoder.
func TestParseSMARTLogFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want smartLog
	}{
		{"healthy.bin", smartLog{
			CriticalWarning: 0x00, CompositeTemperatureK: 310,
			AvailableSparePct: 100, AvailableSpareThreshPct: 10, PercentageUsed: 7,
			DataUnitsRead: u(1412055731), DataUnitsWritten: u(906114502),
			HostReadCommands: u(96310447218), HostWriteCommands: u(41902366015),
			ControllerBusyMin: u(14906), PowerCycles: u(38), PowerOnHours: u(10847),
			UnsafeShutdowns: u(5), MediaErrors: u(0), ErrorLogEntries: u(14),
			WarningTempTimeMin: 0, CriticalTempTimeMn: 0,
			TemperatureSensorK: [8]uint16{312, 318, 309},
		}},
		{"failing.bin", smartLog{
			CriticalWarning: 0x0D, CompositeTemperatureK: 338,
			AvailableSparePct: 3, AvailableSpareThreshPct: 10, PercentageUsed: 103,
			DataUnitsRead: u(9610337482), DataUnitsWritten: u(14712044118),
			HostReadCommands: u(76180331207), HostWriteCommands: u(114887120334),
			ControllerBusyMin: u(733210), PowerCycles: u(118), PowerOnHours: u(52116),
			UnsafeShutdowns: u(213), MediaErrors: u(1847), ErrorLogEntries: u(65531),
			WarningTempTimeMin: 1204, CriticalTempTimeMn: 3,
			TemperatureSensorK:       [8]uint16{341, 352},
			ThermalMgmtT1Transitions: 88, ThermalMgmtT2Transitions: 2,
			ThermalMgmtT1Seconds: 39021, ThermalMgmtT2Seconds: 311,
		}},
		// Real capture (QEMU NVMe, Linux 6.1).
		{"qemu.bin", smartLog{
			CompositeTemperatureK: 323,
			DataUnitsRead:         u(67), DataUnitsWritten: u(33),
			HostReadCommands: u(94), HostWriteCommands: u(32),
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := parseSMARTLog(readBin(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Errorf("decoded\n%+v\nwant\n%+v", *got, tc.want)
			}
		})
	}
}

func TestDataUnitBytes(t *testing.T) {
	l, err := parseSMARTLog(readBin(t, "healthy.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// 1 412 055 731 units of 512 000 bytes = 722 972 534 272 000 bytes.
	if got := l.DataUnitsRead.Float64() * bytesPerDataUnit; got != 722972534272000 {
		t.Errorf("read bytes = %v", got)
	}
	if got := l.DataUnitsWritten.Float64() * bytesPerDataUnit; got != 463930625024000 {
		t.Errorf("written bytes = %v", got)
	}
}

func TestParseSMARTLog128Bit(t *testing.T) {
	b := readBin(t, "healthy.bin")
	// Set the upper halves: data_units_read = 2*2^64 + 5, media_errors = 3*2^64.
	binary.LittleEndian.PutUint64(b[32+8:], 2)
	binary.LittleEndian.PutUint64(b[32:], 5)
	binary.LittleEndian.PutUint64(b[160+8:], 3)
	binary.LittleEndian.PutUint64(b[160:], 0)
	l, err := parseSMARTLog(b)
	if err != nil {
		t.Fatal(err)
	}
	if l.DataUnitsRead != (uint128{Lo: 5, Hi: 2}) {
		t.Fatalf("data units read = %+v", l.DataUnitsRead)
	}
	if got, want := l.MediaErrors.Float64(), 3*math.Pow(2, 64); got != want {
		t.Errorf("media errors = %v, want %v", got, want)
	}
	if got, want := l.DataUnitsRead.Float64(), math.Pow(2, 65); got != want {
		t.Errorf("2*2^64+5 read as %v, want %v (float64 rounding of the 128-bit value)", got, want)
	}
	// The byte conversion must not overflow or wrap either.
	if got, want := l.DataUnitsRead.Float64()*bytesPerDataUnit, math.Pow(2, 65)*512000; math.Abs(got-want)/want > 1e-15 {
		t.Errorf("bytes = %v, want ~%v", got, want)
	}
	if s := (uint128{Lo: 5, Hi: 1}).String(); s != "0x10000000000000005" {
		t.Errorf("String = %s", s)
	}
	// All ones is the largest value, still finite.
	max := uint128{Lo: math.MaxUint64, Hi: math.MaxUint64}
	if f := max.Float64(); math.IsInf(f, 0) || f < math.Pow(2, 127) {
		t.Errorf("max = %v", f)
	}
}

func TestParseSMARTLogTruncated(t *testing.T) {
	full := readBin(t, "failing.bin")
	for _, n := range []int{0, 1, 31, 200, 231, 232, 511} {
		if l, err := parseSMARTLog(full[:n]); err == nil || l != nil {
			t.Errorf("%d bytes: got %v, %v; want error", n, l, err)
		} else if !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%d bytes: unhelpful error %v", n, err)
		}
	}
	if _, err := parseSMARTLog(nil); err == nil {
		t.Error("nil buffer accepted")
	}
}

func TestKelvinToCelsius(t *testing.T) {
	for k, want := range map[uint16]float64{310: 36.85, 338: 64.85, 323: 49.85, 273: -0.15, 0: -273.15} {
		if got := kelvinToCelsius(k); got != want {
			t.Errorf("%d K = %v °C, want %v", k, got, want)
		}
	}
}

func FuzzParseSMARTLog(f *testing.F) {
	for _, name := range []string{"healthy.bin", "failing.bin", "qemu.bin"} {
		b := readBin(f, name)
		f.Add(b)
		f.Add(b[:300])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseSMARTLog(b)
		if len(b) < smartLogSize {
			if err == nil {
				t.Fatalf("%d bytes accepted", len(b))
			}
			return
		}
		if err != nil {
			t.Fatalf("%d bytes rejected: %v", len(b), err)
		}
		if l.CriticalWarning != b[0] || l.PercentageUsed != b[5] {
			t.Fatal("single-byte fields misplaced")
		}
		for _, v := range []uint128{l.DataUnitsRead, l.MediaErrors, l.ErrorLogEntries} {
			if f := v.Float64(); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				t.Fatalf("counter %v converts to %v", v, f)
			}
		}
	})
}
