//go:build demo

// The demo build of plexporter-rdma (make demo): the plugin unchanged,
// except that RDMA netlink is answered from the messages recorded in
// testdata/nl-synth (an mlx5 device with every optional counter enabled
// and a QP counter dump with traffic counters: the *_all_on and *_traffic
// replies) instead of the kernel, which needs the hardware. Sysfs is
// the demo's tree (internal/dev/demo/demotree). Only mlx5_0 was recorded, so the
// device list it answers holds only mlx5_0: the other devices are read from
// sysfs alone, as devices of another network namespace are.
package main

import (
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"github.com/plexporter/plexporter/sdk"
)

//go:embed testdata/nl-synth/*.bin
var demoRecordings embed.FS

// demoExchanges pairs each recorded request with the reply the demo gives.
var demoExchanges = map[string]string{
	"req_get_dump.bin":                   "resp_get_dump.bin",
	"req_stat_get_status_dev0_port1.bin": "resp_stat_get_status_dev0_port1_all_on.bin",
	"req_stat_get_dev0_port1.bin":        "resp_stat_get_dev0_port1_all_on.bin",
	"req_stat_qp_dump_dev0_port1.bin":    "resp_stat_qp_dump_dev0_port1_traffic.bin",
}

const demoDevice = "mlx5_0"

func main() {
	k, err := newDemoKernel()
	if err != nil {
		panic("demo netlink recordings: " + err.Error())
	}
	p := newPlugin()
	p.dial = func() (nlConn, error) { return nltest.Dial(k.answer), nil }
	sdk.Serve(p)
}

// demoKernel answers recorded requests with their recorded replies.
type demoKernel struct {
	replies map[string][]netlink.Message // by demoKey of the request
}

func newDemoKernel() (*demoKernel, error) {
	k := &demoKernel{replies: map[string][]netlink.Message{}}
	for req, resp := range demoExchanges {
		reqs, err := demoMessages(req)
		if err != nil {
			return nil, err
		}
		reply, err := demoMessages(resp)
		if err != nil {
			return nil, err
		}
		switch req {
		case "req_get_dump.bin":
			reply = onlyDevice(reply, demoDevice)
		case "req_stat_qp_dump_dev0_port1.bin":
			if reply, err = unbindPID(reply); err != nil {
				return nil, err
			}
		}
		k.replies[demoKey(reqs[0])] = reply
	}
	return k, nil
}

// answer is the fake kernel's side of one send: the recorded reply of each
// request, with its sequence number. The QP counter mode query was not
// recorded: it answers "auto, by type", the mode whose counters are dumped.
func (k *demoKernel) answer(reqs []netlink.Message) ([]netlink.Message, error) {
	if reqs == nil {
		return nil, io.EOF
	}
	var out []netlink.Message
	for _, req := range reqs {
		reply, ok := k.replies[demoKey(req)]
		if !ok && isQPModeQuery(req) {
			reply, ok = qpModeAutoByType(), true
		}
		if !ok {
			return nltest.Error(int(unix.EOPNOTSUPP), []netlink.Message{req})
		}
		for _, m := range reply {
			m.Header.Sequence, m.Header.PID = req.Header.Sequence, nltest.PID
			out = append(out, m)
		}
	}
	return out, nil
}

// demoKey identifies a request by its bytes, sequence and port id aside.
func demoKey(m netlink.Message) string {
	m.Header.Sequence, m.Header.PID = 0, 0
	m.Header.Length = uint32(16 + len(m.Data))
	b, _ := m.MarshalBinary()
	return string(b)
}

// demoMessages reads the netlink messages of one recording.
func demoMessages(name string) ([]netlink.Message, error) {
	b, err := demoRecordings.ReadFile(path.Join("testdata/nl-synth", name))
	if err != nil {
		return nil, err
	}
	var out []netlink.Message
	for len(b) > 0 {
		if len(b) < 16 {
			return nil, fmt.Errorf("%s: trailing %d bytes", name, len(b))
		}
		l := int(binary.NativeEndian.Uint32(b[:4]))
		if l < 16 || l > len(b) {
			return nil, fmt.Errorf("%s: bad message length %d", name, l)
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:l]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, m)
		b = b[min((l+3)&^3, len(b)):] // messages are 4-byte aligned
	}
	if len(out) == 0 {
		return nil, errors.New(name + ": no message")
	}
	return out, nil
}

// onlyDevice keeps the device-dump entries of dev (and the messages that
// are not entries: the dump's end).
func onlyDevice(msgs []netlink.Message, dev string) []netlink.Message {
	var out []netlink.Message
	for _, m := range msgs {
		if m.Header.Type == netlink.Done || m.Header.Type == netlink.Error {
			out = append(out, m)
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			continue
		}
		for ad.Next() {
			if ad.Type() == attrDevName && ad.String() == dev {
				out = append(out, m)
			}
		}
	}
	return out
}

// unbindPID serves the recorded QP counters as counters of the "auto, by
// type" mode the demo answers (qpModeAutoByType): the recording's counter
// is bound by PID, which that mode does not do, and the plugin would rightly
// leave it out. The values are the recording's.
func unbindPID(msgs []netlink.Message) ([]netlink.Message, error) {
	out := make([]netlink.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Header.Type == netlink.Done || m.Header.Type == netlink.Error {
			out = append(out, m)
			continue
		}
		attrs, err := netlink.UnmarshalAttributes(m.Data)
		if err != nil {
			return nil, err
		}
		for i, a := range attrs {
			if a.Type&attrTypeMask != attrStatCounter {
				continue
			}
			data, err := rewriteNested(a.Data, func(entry netlink.Attribute) (netlink.Attribute, error) {
				data, err := dropAttrs(entry.Data, attrResPID, attrResKernName)
				return withData(entry, data), err
			})
			if err != nil {
				return nil, err
			}
			attrs[i] = withData(a, data)
		}
		if m.Data, err = netlink.MarshalAttributes(attrs); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// withData is a with other contents; Length is the attribute's on the wire,
// which MarshalAttributes writes as it is.
func withData(a netlink.Attribute, data []byte) netlink.Attribute {
	a.Data, a.Length = data, uint16(4+len(data))
	return a
}

// attrTypeMask strips the nested and byte-order flags off an attribute type.
const attrTypeMask = 0x3fff

func rewriteNested(b []byte, f func(netlink.Attribute) (netlink.Attribute, error)) ([]byte, error) {
	attrs, err := netlink.UnmarshalAttributes(b)
	if err != nil {
		return nil, err
	}
	for i := range attrs {
		if attrs[i], err = f(attrs[i]); err != nil {
			return nil, err
		}
	}
	return netlink.MarshalAttributes(attrs)
}

func dropAttrs(b []byte, types ...uint16) ([]byte, error) {
	attrs, err := netlink.UnmarshalAttributes(b)
	if err != nil {
		return nil, err
	}
	kept := attrs[:0]
	for _, a := range attrs {
		if !slices.Contains(types, a.Type&attrTypeMask) {
			kept = append(kept, a)
		}
	}
	return netlink.MarshalAttributes(kept)
}

// isQPModeQuery reports whether req asks a port's QP counter mode (a
// STAT_GET doit naming the QP resource).
func isQPModeQuery(req netlink.Message) bool {
	if req.Header.Type != nldevType(cmdStatGet) || req.Header.Flags&netlink.Dump != 0 {
		return false
	}
	ad, err := netlink.NewAttributeDecoder(req.Data)
	if err != nil {
		return false
	}
	for ad.Next() {
		if ad.Type() == attrStatRes && ad.Uint32() == attrResQP {
			return true
		}
	}
	return false
}

func qpModeAutoByType() []netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attrDevIndex, 0)
	ae.String(attrDevName, demoDevice)
	ae.Uint32(attrPortIndex, 1)
	ae.Uint32(attrStatMode, counterModeAuto)
	ae.Uint32(attrStatAutoModeMask, autoMaskType)
	data, _ := ae.Encode()
	return []netlink.Message{
		{Header: netlink.Header{Type: nldevType(cmdStatGet)}, Data: data},
		{Header: netlink.Header{Type: netlink.Error, Flags: 0x100}, Data: make([]byte, 20)}, // the ACK
	}
}
