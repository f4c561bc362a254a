package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/mdlayher/netlink"

	"github.com/plexporter/plexporter/plugins/internal/rdmanl"
)

// RDMA netlink resource tracking: the numbers of
// include/uapi/rdma/rdma_netlink.h this file uses.
const (
	cmdGet      = 1  // RDMA_NLDEV_CMD_GET: the device list (a dump)
	cmdResQPGet = 10 // RDMA_NLDEV_CMD_RES_QP_GET: one device's queue pairs (a dump)

	attrDevIndex    = 1  // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	attrDevName     = 2  // RDMA_NLDEV_ATTR_DEV_NAME, string
	attrPortIndex   = 3  // RDMA_NLDEV_ATTR_PORT_INDEX, u32: the QP's port once it has one
	attrResQP       = 19 // RDMA_NLDEV_ATTR_RES_QP, nest of RES_QP_ENTRY
	attrResQPEntry  = 20 // RDMA_NLDEV_ATTR_RES_QP_ENTRY, nest: one QP
	attrResLQPN     = 21 // RDMA_NLDEV_ATTR_RES_LQPN, u32: the QP number
	attrResPID      = 28 // RDMA_NLDEV_ATTR_RES_PID, u32: the creating process, in the reader's PID namespace
	attrResKernName = 29 // RDMA_NLDEV_ATTR_RES_KERN_NAME, string: a kernel-owned QP's module

	// The receive budget of one device's QP dump: an entry is about 80
	// bytes, so 8 MiB is some 100 000 queue pairs (a node of 128 MPI
	// ranks with a QP to each of 500 peers holds 64 000).
	qpDumpMaxBytes = 8 << 20
	qpDumpMaxMsgs  = 4096
)

// queuePair is one RES_QP_ENTRY.
type queuePair struct {
	Device string
	Port   uint32 // 0: not bound to a port yet (RESET)
	QPN    uint32
	PID    uint32 // 0: kernel-owned (KernOwner says by what) or its process is gone
	// KernOwner is RES_KERN_NAME ("ib_core", "rdma_cm", "ib_ipoib").
	KernOwner string
}

// qpOwners is the configured queue pair owner source.
type qpOwners struct {
	procfs    string
	maxSeries int
	dial      func() (rdmanl.Conn, error)
}

// readOnlyQP refuses every message but the two reads this source sends:
// the plugin has no business changing RDMA state.
func readOnlyQP(m netlink.Message) error {
	client, op := int(m.Header.Type)>>10, int(m.Header.Type)&0x3ff
	if client != rdmanl.ClientNLDEV || (op != cmdGet && op != cmdResQPGet) {
		return fmt.Errorf("refusing to send RDMA netlink client %d op %d", client, op)
	}
	return nil
}

// dumpQueuePairs lists the devices and dumps each one's queue pairs, as
// `rdma resource show qp` does. A device whose dump fails is an error
// naming it; the other devices' queue pairs are still returned. The
// kernel shows only the queue pairs of processes in the caller's PID
// namespace, and kernel-owned ones only to the initial one.
func dumpQueuePairs(ctx context.Context, c rdmanl.Conn) ([]queuePair, []error) {
	req := netlink.Message{Header: netlink.Header{Type: rdmanl.Type(cmdGet), Flags: netlink.Request | netlink.Acknowledge | netlink.Dump}}
	devMsgs, err := dumpWithin(ctx, c, req)
	if err != nil {
		return nil, []error{fmt.Errorf("rdma netlink device list: %w", err)}
	}
	var qps []queuePair
	var errs []error
	for _, m := range devMsgs {
		idx, name, err := parseDeviceID(m.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("rdma netlink device list: %w", err))
			continue
		}
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(attrDevIndex, idx)
		data, err := ae.Encode()
		if err != nil {
			return qps, append(errs, err)
		}
		req := netlink.Message{Header: netlink.Header{Type: rdmanl.Type(cmdResQPGet), Flags: netlink.Request | netlink.Acknowledge | netlink.Dump}, Data: data}
		msgs, err := dumpWithin(ctx, c, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("rdma netlink queue pairs of %s: %w", name, err))
			continue
		}
		for _, m := range msgs {
			got, err := parseQPDump(m.Data)
			if err != nil {
				errs = append(errs, fmt.Errorf("rdma netlink queue pairs of %s: %w", name, err))
				break
			}
			qps = append(qps, got...)
		}
	}
	return qps, errs
}

func dumpWithin(ctx context.Context, c rdmanl.Conn, req netlink.Message) ([]netlink.Message, error) {
	if err := readOnlyQP(req); err != nil {
		return nil, err
	}
	return rdmanl.DumpWithin(ctx, c, req, qpDumpMaxBytes, qpDumpMaxMsgs)
}

// decode runs fn over the attributes in b and returns the first decoding
// error: a truncated header, a length past the end, a value of the wrong
// size.
func decode(b []byte, fn func(ad *netlink.AttributeDecoder)) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	fn(ad)
	return ad.Err()
}

// parseDeviceID reads a device list message's DEV_INDEX and DEV_NAME.
func parseDeviceID(b []byte) (uint32, string, error) {
	var idx uint32
	var name string
	var haveIdx bool
	err := decode(b, func(ad *netlink.AttributeDecoder) {
		for ad.Next() {
			switch ad.Type() {
			case attrDevIndex:
				idx, haveIdx = ad.Uint32(), true
			case attrDevName:
				name = ad.String()
			}
		}
	})
	if err == nil && (!haveIdx || name == "") {
		err = errors.New("device message without DEV_INDEX or DEV_NAME")
	}
	return idx, name, err
}

// parseQPDump decodes one message of a RES_QP_GET dump: the device's
// DEV_INDEX and DEV_NAME, then RES_QP, a nest of one RES_QP_ENTRY per
// queue pair (the kernel may split a device's queue pairs over several
// messages, each with the device attributes again).
func parseQPDump(b []byte) ([]queuePair, error) {
	var dev string
	var out []queuePair
	err := decode(b, func(ad *netlink.AttributeDecoder) {
		for ad.Next() {
			switch ad.Type() {
			case attrDevName:
				dev = ad.String()
			case attrResQP:
				ad.Nested(func(tad *netlink.AttributeDecoder) error {
					for tad.Next() {
						if tad.Type() != attrResQPEntry {
							continue
						}
						var qp queuePair
						tad.Nested(func(ead *netlink.AttributeDecoder) error {
							for ead.Next() {
								switch ead.Type() {
								case attrPortIndex:
									qp.Port = ead.Uint32()
								case attrResLQPN:
									qp.QPN = ead.Uint32()
								case attrResPID:
									qp.PID = ead.Uint32()
								case attrResKernName:
									qp.KernOwner = ead.String()
								}
							}
							return nil
						})
						out = append(out, qp)
					}
					return nil
				})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if dev == "" && len(out) > 0 {
		return nil, errors.New("queue pair message without DEV_NAME")
	}
	for i := range out {
		out[i].Device = dev
	}
	return out, nil
}

// qpOwnerKey is one series of rdma_qp_owner_info.
type qpOwnerKey struct {
	Device, Port string
	Owner        owner
}

// qpOwnerCount is an owner with the number of its queue pairs.
type qpOwnerCount struct {
	qpOwnerKey
	QPs int
}

// ownersOf joins queue pairs with their processes' cgroups (read under
// procfs, once per process): one entry per device, port and owner, in the
// order first seen. Kernel-owned queue pairs and those of processes in
// neither a job nor a pod have no owner; a process gone since the dump
// has none either.
func ownersOf(pfs procfsReader, procfs string, qps []queuePair) []qpOwnerCount {
	byPID := map[uint32]owner{}
	index := map[qpOwnerKey]int{}
	var out []qpOwnerCount
	for _, qp := range qps {
		if qp.PID == 0 {
			continue // RES_KERN_NAME, or the kernel could not name the task
		}
		o, ok := byPID[qp.PID]
		if !ok {
			o, _ = readOwner(pfs, filepath.Join(procfs, strconv.FormatUint(uint64(qp.PID), 10)))
			byPID[qp.PID] = o
		}
		if !o.known() {
			continue
		}
		port := ""
		if qp.Port != 0 {
			port = strconv.FormatUint(uint64(qp.Port), 10)
		}
		k := qpOwnerKey{Device: qp.Device, Port: port, Owner: o}
		if i, ok := index[k]; ok {
			out[i].QPs++
			continue
		}
		index[k] = len(out)
		out = append(out, qpOwnerCount{qpOwnerKey: k, QPs: 1})
	}
	return out
}
