package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"

	"github.com/plexporter/plexporter/plugins/internal/rdmanl"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// The fake kernel's queue pairs, as RDMA_NLDEV_CMD_RES_QP_GET dumps them
// (drivers/infiniband/core/nldev.c, fill_res_qp_entry): the processes are
// those of testdata/procjobs.ttar.
type fakeQP struct {
	port, qpn, pid uint32
	kern           string // RES_KERN_NAME instead of RES_PID
}

type fakeRDMADevice struct {
	index uint32
	name  string
	// parts are the messages of its dump: the kernel splits a long list.
	parts [][]fakeQP
	// interrupted flags every run of its dump NLM_F_DUMP_INTR.
	interrupted bool
}

func fixtureRDMA() []fakeRDMADevice {
	return []fakeRDMADevice{
		{index: 0, name: "rxe0", parts: [][]fakeQP{
			{
				{port: 1, qpn: 1, kern: "ib_core"}, // GSI: the kernel's, no owner series
				{port: 1, qpn: 17, pid: 100},       // job 4242 (cgroup v1)
				{port: 1, qpn: 18, pid: 100},
			},
			{
				{port: 1, qpn: 19, pid: 101},  // job 77 (cgroup v2)
				{port: 1, qpn: 20, pid: 102},  // a login session: in no job or pod
				{qpn: 21, pid: 100},           // RESET: no port yet
				{port: 1, qpn: 22, pid: 9999}, // gone since the dump
			},
		}},
		{index: 3, name: "mlx5_2", parts: [][]fakeQP{{
			{port: 1, qpn: 30, pid: 105}, // a pod's container
		}}},
	}
}

// encodeQPDump builds one message of a device's RES_QP_GET dump from the
// uapi attribute numbers (include/uapi/rdma/rdma_netlink.h): DEV_INDEX,
// DEV_NAME, and the RES_QP table of RES_QP_ENTRY nests, which the kernel
// opens with nla_nest_start_noflag (no NLA_F_NESTED); nested sets the flag
// as newer kernels might, to show the decoder does not depend on it.
func encodeQPDump(t *testing.T, d fakeRDMADevice, qps []fakeQP, nested bool) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(attrDevIndex, d.index)
	ae.String(attrDevName, d.name)
	flag := uint16(0)
	if nested {
		flag = netlink.Nested
	}
	table := netlink.NewAttributeEncoder()
	for _, qp := range qps {
		entry := netlink.NewAttributeEncoder()
		if qp.port != 0 {
			entry.Uint32(attrPortIndex, qp.port)
		}
		entry.Uint32(attrResLQPN, qp.qpn)
		entry.Uint8(26, 2) // RDMA_NLDEV_ATTR_RES_TYPE: RC
		entry.Uint8(27, 3) // RDMA_NLDEV_ATTR_RES_STATE: RTS
		if qp.kern != "" {
			entry.String(attrResKernName, qp.kern)
		} else {
			entry.Uint32(attrResPID, qp.pid)
		}
		b, err := entry.Encode()
		if err != nil {
			t.Fatal(err)
		}
		table.Bytes(attrResQPEntry|flag, b)
	}
	b, err := table.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ae.Bytes(attrResQP|flag, b)
	out, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeRDMAKernel answers the device list and each device's QP dump.
func fakeRDMAKernel(t *testing.T, devs []fakeRDMADevice) func() (rdmanl.Conn, error) {
	fn := func(reqs []netlink.Message) ([]netlink.Message, error) {
		var out []netlink.Message
		for _, req := range reqs {
			if req.Header.Flags&netlink.Dump == 0 {
				t.Errorf("request type %d is not a dump", req.Header.Type)
			}
			reply := func(data []byte, flags netlink.HeaderFlags) {
				out = append(out, netlink.Message{Header: netlink.Header{Type: req.Header.Type, Flags: netlink.Multi | flags, Sequence: req.Header.Sequence, PID: nltest.PID}, Data: data})
			}
			switch req.Header.Type {
			case rdmanl.Type(cmdGet):
				for _, d := range devs {
					ae := netlink.NewAttributeEncoder()
					ae.Uint32(attrDevIndex, d.index)
					ae.String(attrDevName, d.name)
					ae.Uint32(attrPortIndex, 1) // in a GET reply: the number of ports
					b, _ := ae.Encode()
					reply(b, 0)
				}
			case rdmanl.Type(cmdResQPGet):
				ad, err := netlink.NewAttributeDecoder(req.Data)
				if err != nil {
					t.Fatal(err)
				}
				idx, have := uint32(0), false
				for ad.Next() {
					if ad.Type() == attrDevIndex {
						idx, have = ad.Uint32(), true
					}
				}
				if !have {
					// The kernel refuses a QP dump without DEV_INDEX (-EINVAL).
					return nltest.Error(22, []netlink.Message{req})
				}
				for _, d := range devs {
					if d.index != idx {
						continue
					}
					var flags netlink.HeaderFlags
					if d.interrupted {
						flags = netlink.DumpInterrupted
					}
					for i, part := range d.parts {
						reply(encodeQPDump(t, d, part, i%2 == 1), flags)
					}
				}
			default:
				t.Errorf("unexpected request type %d", req.Header.Type)
				return nltest.Error(95, []netlink.Message{req})
			}
			out = append(out, netlink.Message{Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi, Sequence: req.Header.Sequence, PID: nltest.PID}, Data: make([]byte, 4)})
		}
		return out, nil
	}
	return func() (rdmanl.Conn, error) { return nltest.Dial(fn), nil }
}

func qpOwnersOptions(t *testing.T) sdktest.Options {
	return cgroupJobsOptions(t, map[string]any{"cgroup_jobs": false, "rdma_qp_owners": true})
}

func TestRDMAQPOwners(t *testing.T) {
	p := newPlugin()
	p.dial = fakeRDMAKernel(t, fixtureRDMA())
	text := sdktest.CleanGolden(t, sdktest.Run(t, p, qpOwnersOptions(t)), "testdata/rdma-qp-owners.golden")
	sdktest.Contains(t, text,
		`rdma_qp_owner_info{device="rxe0",port="1",job_id="4242",pod_uid=""} 1`,
		`rdma_qp_owner_queue_pairs{device="rxe0",port="1",job_id="4242",pod_uid=""} 2`,
		`rdma_qp_owner_info{device="rxe0",port="",job_id="4242",pod_uid=""} 1`,
		`rdma_qp_owner_info{device="rxe0",port="1",job_id="77",pod_uid=""} 1`,
		`rdma_qp_owner_queue_pairs{device="rxe0",port="1",job_id="77",pod_uid=""} 1`,
		`rdma_qp_owner_info{device="mlx5_2",port="1",job_id="",pod_uid="8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70"} 1`,
		`attribution_collection_errors_total{collector="rdma_qp_owners"} 0`,
		`attribution_limit_reached_total{limit="rdma_qp_owners_max_series"} 0`,
	)
	if n := strings.Count(text, "rdma_qp_owner_info{"); n != 4 {
		t.Errorf("%d rdma_qp_owner_info series, want 4: the kernel's QP, a process in no job and a gone one have none", n)
	}
	sdktest.Lacks(t, text, "device_cgroup_job_info{", `collector="cgroup_jobs"`)
	if w := sdktest.Promtool(t, text); w != "" {
		t.Errorf("promtool check metrics:\n%s", w)
	}
}

func TestRDMAQPOwnersCap(t *testing.T) {
	p := newPlugin()
	p.dial = fakeRDMAKernel(t, fixtureRDMA())
	opts := qpOwnersOptions(t)
	opts.Config["rdma_qp_owners_max_series"] = 2
	text := sdktest.Run(t, p, opts).Text(t)
	sdktest.Contains(t, text, `attribution_limit_reached_total{limit="rdma_qp_owners_max_series"} 1`)
	if n := strings.Count(text, "rdma_qp_owner_info{"); n != 2 {
		t.Errorf("%d rdma_qp_owner_info series, want the cap of 2", n)
	}
	if n := strings.Count(text, "rdma_qp_owner_queue_pairs{"); n != 2 {
		t.Errorf("%d rdma_qp_owner_queue_pairs series, want the cap of 2", n)
	}
}

// TestRDMAQPOwnersFailures: a device whose dump keeps being interrupted
// costs its own series and is an error naming it; a socket that cannot
// be opened is an error saying so. Each is counted.
func TestRDMAQPOwnersFailures(t *testing.T) {
	t.Run("interrupted", func(t *testing.T) {
		devs := fixtureRDMA()
		devs[0].interrupted = true
		p := newPlugin()
		p.dial = fakeRDMAKernel(t, devs)
		res := sdktest.Run(t, p, qpOwnersOptions(t))
		text := res.Text(t)
		sdktest.Contains(t, text,
			`rdma_qp_owner_info{device="mlx5_2",port="1",job_id="",pod_uid="8f3a6c1e-0b2d-4c5e-9f1a-2b3c4d5e6f70"} 1`,
			`attribution_collection_errors_total{collector="rdma_qp_owners"} 1`,
		)
		sdktest.Lacks(t, text, `device="rxe0"`)
		if len(res.Errors) != 1 || res.Errors[0].Message != "rdma netlink queue pairs of rxe0: "+rdmanl.ErrDumpInterrupted.Error() {
			t.Errorf("errors %+v", res.Errors)
		}
	})
	t.Run("no rdma netlink", func(t *testing.T) {
		p := newPlugin()
		p.dial = func() (rdmanl.Conn, error) { return nil, errors.New("socket: protocol not supported") }
		res := sdktest.Run(t, p, qpOwnersOptions(t))
		sdktest.Contains(t, res.Text(t), `attribution_collection_errors_total{collector="rdma_qp_owners"} 1`)
		if len(res.Errors) != 1 || res.Errors[0].Message != "rdma netlink: socket: protocol not supported" {
			t.Errorf("errors %+v", res.Errors)
		}
	})
}

// TestReadOnlyQP: the source sends the device list and QP dumps, nothing
// else: not a SET, not a raw QP dump, not another client's message.
func TestReadOnlyQP(t *testing.T) {
	for op, ok := range map[int]bool{cmdGet: true, cmdResQPGet: true, 2: false, 16: false, 19: false, 5: false} {
		err := readOnlyQP(netlink.Message{Header: netlink.Header{Type: rdmanl.Type(op)}})
		if (err == nil) != ok {
			t.Errorf("op %d: %v", op, err)
		}
	}
	if err := readOnlyQP(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(1<<10 | cmdGet)}}); err == nil {
		t.Error("a message of client 1 was accepted")
	}
}

func FuzzParseQPDump(f *testing.F) {
	f.Add([]byte{8, 0, 2, 0, 'r', 'x', 'e', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		qps, err := parseQPDump(b)
		if err == nil {
			for _, qp := range qps {
				if qp.Device == "" {
					t.Fatal("a queue pair without its device")
				}
			}
		}
	})
}

// TestNewSourcesAllowlistPushdown: with their families disabled, neither
// the process scan nor RDMA netlink runs, and the error and limit
// counters of the configured sources are still written.
func TestNewSourcesAllowlistPushdown(t *testing.T) {
	opts := cgroupJobsOptions(t, map[string]any{"rdma_qp_owners": true})
	opts.DisabledMetrics = []string{"device_cgroup_job_info", "rdma_qp_owner_info", "rdma_qp_owner_queue_pairs"}
	p := newPlugin()
	dialed := false
	p.dial = func() (rdmanl.Conn, error) { dialed = true; return nil, errors.New("dialed") }
	p.proc = flakyProcfs{listed: func(dir string) { t.Errorf("the scan listed %s with device_cgroup_job_info disabled", dir) }}
	res := sdktest.Run(t, p, opts)
	if res.Status != nil || len(res.Errors) != 0 {
		t.Fatalf("status %v, errors %v", res.Status, res.Errors)
	}
	text := res.Text(t)
	if dialed {
		t.Error("RDMA netlink dialled with the rdma_qp_owner families disabled")
	}
	sdktest.Contains(t, text,
		`attribution_collection_errors_total{collector="cgroup_jobs"} 0`,
		`attribution_collection_errors_total{collector="rdma_qp_owners"} 0`,
		`attribution_limit_reached_total{limit="rdma_qp_owners_max_series"} 0`,
		`attribution_unreadable_fd_dirs_total 0`,
	)
}
