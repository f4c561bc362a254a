package main

import (
	"encoding/binary"
	"fmt"
	"math"
)

// smartLogSize is the size of the SMART / Health Information log page
// (Log Identifier 02h) in bytes.
const smartLogSize = 512

// Critical warning bits of the SMART log, in bit order, with the label value
// each one is exported under.
var criticalWarningBits = [...]string{
	0: "spare_low",
	1: "temperature",
	2: "reliability",
	3: "readonly",
	4: "volatile_backup_failed",
	5: "pmr_unreliable",
}

// uint128 is a little-endian 128-bit counter from the log page.
type uint128 struct{ Lo, Hi uint64 }

// Float64 converts the full 128 bits (not just the low half) to a float.
func (u uint128) Float64() float64 {
	return float64(u.Hi)*0x1p64 + float64(u.Lo)
}

func (u uint128) String() string {
	if u.Hi == 0 {
		return fmt.Sprint(u.Lo)
	}
	return fmt.Sprintf("0x%x%016x", u.Hi, u.Lo)
}

// smartLog is the decoded SMART / Health Information log page. Fields keep
// the device's units; conversion to base units happens when exporting.
type smartLog struct {
	CriticalWarning         uint8
	CompositeTemperatureK   uint16 // 0: not reported
	AvailableSparePct       uint8
	AvailableSpareThreshPct uint8
	PercentageUsed          uint8 // may exceed 100, saturates at 255
	EnduranceGroupWarning   uint8

	DataUnitsRead      uint128 // units of 1000 × 512 bytes
	DataUnitsWritten   uint128
	HostReadCommands   uint128
	HostWriteCommands  uint128
	ControllerBusyMin  uint128 // minutes
	PowerCycles        uint128
	PowerOnHours       uint128
	UnsafeShutdowns    uint128
	MediaErrors        uint128
	ErrorLogEntries    uint128
	WarningTempTimeMin uint32
	CriticalTempTimeMn uint32
	TemperatureSensorK [8]uint16 // 0: sensor not implemented

	ThermalMgmtT1Transitions uint32
	ThermalMgmtT2Transitions uint32
	ThermalMgmtT1Seconds     uint32
	ThermalMgmtT2Seconds     uint32
}

// parseSMARTLog decodes a SMART / Health log page. A buffer shorter than the
// 512-byte page is an error; the reserved bytes are not interpreted.
func parseSMARTLog(b []byte) (*smartLog, error) {
	if len(b) < smartLogSize {
		return nil, fmt.Errorf("SMART log truncated: %d bytes, want %d", len(b), smartLogSize)
	}
	le := binary.LittleEndian
	u128 := func(off int) uint128 {
		return uint128{Lo: le.Uint64(b[off:]), Hi: le.Uint64(b[off+8:])}
	}
	l := &smartLog{
		CriticalWarning:         b[0],
		CompositeTemperatureK:   le.Uint16(b[1:]),
		AvailableSparePct:       b[3],
		AvailableSpareThreshPct: b[4],
		PercentageUsed:          b[5],
		EnduranceGroupWarning:   b[6],
		DataUnitsRead:           u128(32),
		DataUnitsWritten:        u128(48),
		HostReadCommands:        u128(64),
		HostWriteCommands:       u128(80),
		ControllerBusyMin:       u128(96),
		PowerCycles:             u128(112),
		PowerOnHours:            u128(128),
		UnsafeShutdowns:         u128(144),
		MediaErrors:             u128(160),
		ErrorLogEntries:         u128(176),
		WarningTempTimeMin:      le.Uint32(b[192:]),
		CriticalTempTimeMn:      le.Uint32(b[196:]),

		ThermalMgmtT1Transitions: le.Uint32(b[216:]),
		ThermalMgmtT2Transitions: le.Uint32(b[220:]),
		ThermalMgmtT1Seconds:     le.Uint32(b[224:]),
		ThermalMgmtT2Seconds:     le.Uint32(b[228:]),
	}
	for i := range l.TemperatureSensorK {
		l.TemperatureSensorK[i] = le.Uint16(b[200+2*i:])
	}
	return l, nil
}

// kelvinToCelsius converts a whole-Kelvin reading, rounded to 0.01 °C so
// that 310 K reads 36.85 and not 36.850000000000023.
func kelvinToCelsius(k uint16) float64 {
	return math.Round((float64(k)-273.15)*100) / 100
}

// Conversions to base units.
const (
	bytesPerDataUnit = 1000 * 512
	secondsPerMinute = 60
	secondsPerHour   = 3600
)
