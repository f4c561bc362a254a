package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"

	"github.com/plexporter/plexporter/plugins/internal/rdmanl"
	"github.com/plexporter/plexporter/plugins/internal/rdmanl/rdmanltest"
	"github.com/plexporter/plexporter/sdk/sdktest"
)

// testdata/nl-real: a RES_QP_GET dump of rxe0 captured on Debian 12's
// kernel in the lab (test/lab/guestcheck, attribution/rdma-qp-owner,
// owners.txt says when and on which kernel) while an rping server and
// client ran in job 4242's cgroup, with `rdma -j resource show qp` and
// the rping processes' /proc/<pid>/cgroup at the same moment.
const realDir = "testdata/nl-real"

// iproute2QP is one entry of `rdma -j resource show qp`.
type iproute2QP struct {
	IfName string `json:"ifname"`
	Port   uint32 `json:"port"`
	LQPN   uint32 `json:"lqpn"`
	PID    uint32 `json:"pid"`
	Comm   string `json:"comm"`
}

// TestParseQPDumpRealKernel: the plugin decodes the real kernel's dump to
// the queue pairs iproute2 printed from the same kernel at that moment:
// numbers, ports, pids, and the kernel's own by the module iproute2 shows
// in brackets.
func TestParseQPDumpRealKernel(t *testing.T) {
	var got []queuePair
	for _, m := range rdmanltest.ReadMessages(t, filepath.Join(realDir, "resp_res_qp_dump_rxe0.bin")) {
		if m.Header.Type == netlink.Done || m.Header.Type == netlink.Error {
			continue
		}
		qps, err := parseQPDump(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, qps...)
	}
	raw, err := os.ReadFile(filepath.Join(realDir, "rdma-res-show-qp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var show []iproute2QP
	if err := json.Unmarshal(raw, &show); err != nil {
		t.Fatal(err)
	}
	var want []queuePair
	users := 0
	for _, q := range show {
		if q.IfName != "rxe0" {
			continue
		}
		qp := queuePair{Device: q.IfName, Port: q.Port, QPN: q.LQPN, PID: q.PID}
		if q.PID == 0 {
			qp.KernOwner = strings.Trim(q.Comm, "[]")
		} else {
			users++
		}
		want = append(want, qp)
	}
	if users < 2 {
		t.Fatalf("the capture has %d user queue pairs, want rping's two at least", users)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decoded\n%+v\nrdma resource show qp\n%+v", got, want)
	}
}

// TestRDMAQPOwnersRealKernel: the captured dump through the plugin, with
// the rping processes' captured cgroups as procfs: one owner, job 4242 on
// rxe0 port 1, with as many queue pairs as iproute2 listed for them.
func TestRDMAQPOwnersRealKernel(t *testing.T) {
	proc := t.TempDir()
	owners, err := os.ReadFile(filepath.Join(realDir, "owners.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pids := 0
	for _, line := range strings.Split(string(owners), "\n") {
		var pid int
		var cg string
		if n, _ := fmt.Sscanf(line, "rping pid %d cgroup %s", &pid, &cg); n == 2 {
			mkdirAll(t, filepath.Join(proc, fmt.Sprint(pid)))
			writeFile(t, filepath.Join(proc, fmt.Sprint(pid), "cgroup"), cg+"\n")
			pids++
		}
	}
	if pids != 2 {
		t.Fatalf("owners.txt names %d rping processes, want 2", pids)
	}
	dump := rdmanltest.ReadMessages(t, filepath.Join(realDir, "resp_res_qp_dump_rxe0.bin"))
	fn := func(reqs []netlink.Message) ([]netlink.Message, error) {
		var out []netlink.Message
		for _, req := range reqs {
			var reply []netlink.Message
			switch req.Header.Type {
			case rdmanl.Type(cmdGet):
				ae := netlink.NewAttributeEncoder()
				ae.Uint32(attrDevIndex, 0)
				ae.String(attrDevName, "rxe0")
				b, _ := ae.Encode()
				reply = []netlink.Message{{Header: netlink.Header{Type: req.Header.Type, Flags: netlink.Multi}, Data: b}, {Header: netlink.Header{Type: netlink.Done, Flags: netlink.Multi}, Data: make([]byte, 4)}}
			case rdmanl.Type(cmdResQPGet):
				reply = dump
			}
			for _, m := range reply {
				m.Header.Sequence, m.Header.PID = req.Header.Sequence, nltest.PID
				out = append(out, m)
			}
		}
		return out, nil
	}
	p := newPlugin()
	p.dial = func() (rdmanl.Conn, error) { return nltest.Dial(fn), nil }
	res := sdktest.Run(t, p, sdktest.Options{Sysfs: t.TempDir(), Procfs: proc, Rootfs: "/", Config: map[string]any{"pod_resources_socket": "", "rdma_qp_owners": true}})
	if len(res.Errors) != 0 {
		t.Fatalf("errors %v", res.Errors)
	}
	text := res.Text(t)
	sdktest.Contains(t, text,
		`rdma_qp_owner_info{device="rxe0",port="1",job_id="4242",pod_uid=""} 1`,
		`rdma_qp_owner_queue_pairs{device="rxe0",port="1",job_id="4242",pod_uid=""} 2`,
	)
	if n := strings.Count(text, "rdma_qp_owner_info{"); n != 1 {
		t.Errorf("%d owners, want rping's job only (the kernel's queue pair has none)", n)
	}
}
