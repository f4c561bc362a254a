package main

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/plexporter/plexporter/plugins/internal/nfsvolume"
)

// TestParserAgreesWithProcfs: on every fixture prometheus/procfs accepts,
// each value the parser reads equals procfs' (the oracle; the parser is
// our own because procfs cannot tell a printed 0 from an absent field).
func TestParserAgreesWithProcfs(t *testing.T) {
	for _, f := range []string{"mountstats-nfs4.2-nconnect4", "mountstats-nfs3-tcp", "mountstats-mixed",
		"mountstats-real-6.1", "mountstats-real-6.1-labrun1", "mountstats-oldkernel-transports"} {
		root := procRoot(t, f, "", "")
		p, ok := procfsProc(filepath.Join(root, "self", "mountstats"))
		if !ok {
			t.Fatalf("%s: procfs path not recognised", f)
		}
		want, err := p.MountStats()
		if err != nil {
			t.Fatalf("%s: procfs: %v", f, err)
		}
		got, errs := parseMountstats(readTestdata(t, f))
		if len(errs) != 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		compared := 0
		for _, m := range want {
			st, ok := m.Stats.(*procfs.MountStatsNFS)
			if !ok {
				continue
			}
			i := slices.IndexFunc(got, func(b *block) bool { return b.mountPoint == m.Mount })
			if i < 0 {
				t.Errorf("%s: mount %s missing", f, m.Mount)
				continue
			}
			compared++
			b := got[i]
			if !b.hasAge || b.age != uint64(st.Age.Seconds()) || b.statVers != st.StatVersion || b.opts["vers"] != st.Opts["vers"] {
				t.Errorf("%s %s: header/age differ: %+v", f, m.Mount, b)
			}
			agree(t, f+" "+m.Mount+" events", b.events, &st.Events)
			agree(t, f+" "+m.Mount+" bytes", b.bytes, &st.Bytes)
			if len(b.ops) != len(st.Operations) {
				t.Errorf("%s %s: %d ops, procfs %d", f, m.Mount, len(b.ops), len(st.Operations))
			}
			for k := range min(len(b.ops), len(st.Operations)) {
				o := st.Operations[k]
				if b.ops[k].name != o.Operation {
					t.Errorf("%s %s: op %d %s, procfs %s", f, m.Mount, k, b.ops[k].name, o.Operation)
				}
				agree(t, f+" "+m.Mount+" op "+o.Operation, b.ops[k].fields, &o)
			}
			if len(b.xprts) != len(st.Transport) {
				t.Fatalf("%s %s: %d xprts, procfs %d", f, m.Mount, len(b.xprts), len(st.Transport))
			}
			for k, x := range st.Transport {
				l := lane{xprt: b.xprts[k]}
				lo := l.layout
				for name, pair := range map[string][2]any{
					"port": {lo.port, x.Port}, "bind": {lo.bind, x.Bind}, "sends": {lo.sends, x.Sends}, "recvs": {lo.recvs, x.Receives},
					"bad_xids": {lo.badXids, x.BadTransactionIDs}, "req_u": {lo.reqU, x.CumulativeActiveRequests}, "bklog_u": {lo.bklogU, x.CumulativeBacklog},
					"connect": {lo.connect, x.Connect}, "idle": {lo.idle, x.IdleTimeSeconds},
					"max_slots": {lo.maxSlots, x.MaximumRPCSlotsUsed}, "sending_u": {lo.sendingU, x.CumulativeSendingQueue}, "pending_u": {lo.pendingU, x.CumulativePendingQueue},
				} {
					pos, want := pair[0].(int), pair[1].(uint64)
					if name == "max_slots" || name == "sending_u" || name == "pending_u" {
						if !lo.slots(b.statVers) {
							continue
						}
					}
					got, ok := l.get(pos)
					if pos >= 0 && (!ok || got != want) {
						t.Errorf("%s %s xprt %d %s: %d (present %v), procfs %d", f, m.Mount, k, name, got, ok, want)
					}
				}
				if l.proto != x.Protocol {
					t.Errorf("%s %s xprt %d: %s, procfs %s", f, m.Mount, k, l.proto, x.Protocol)
				}
			}
		}
		if compared == 0 {
			t.Errorf("%s: no NFS mount compared", f)
		}
	}
}

// agree compares a line's numbers with the uint64 fields of a procfs
// struct, in declaration order (procfs declares them in the kernel's print
// order). A field the kernel did not print must be absent, and procfs 0.
func agree(t *testing.T, what string, f fields, st any) {
	t.Helper()
	v := reflect.ValueOf(st).Elem()
	k := 0
	for i := range v.NumField() {
		if v.Field(i).Kind() != reflect.Uint64 {
			continue
		}
		want := v.Field(i).Uint()
		got, ok := f.get(k)
		if ok && got != want || !ok && want != 0 {
			t.Errorf("%s: field %d (%s) = %d (present %v), procfs %d", what, k, v.Type().Field(i).Name, got, ok, want)
		}
		k++
	}
}

// TestParserRefusesWhatTheKernelDidNotPrint: truncated or contradictory
// lines are reported and export nothing; an 8-number per-op line has no
// errors field; a negative sum printed unsigned is absent.
func TestParserRefusesWhatTheKernelDidNotPrint(t *testing.T) {
	head := "device 10.0.0.1:/x mounted on /x with fstype nfs statvers=1.1\n\topts:\trw,vers=3\n"
	for _, tc := range []struct {
		name, body, wantErr string
		check               func(t *testing.T, b *block)
	}{
		{"1-field bytes line", "\tage:\t5\n\tbytes:\t7\n", "bytes: 1 numbers, the kernel prints at least 8", func(t *testing.T, b *block) {
			if _, ok := b.bytes.get(0); ok {
				t.Error("a truncated bytes line exported its first field")
			}
		}},
		{"1-field events line", "\tage:\t5\n\tevents:\t3\n", "events: 1 numbers", func(t *testing.T, b *block) {
			if len(b.events.v) != 0 {
				t.Error("a truncated events line was kept")
			}
		}},
		{"short tcp line", "\tage:\t5\n\txprt:\ttcp 1 2 3\n", "xprt tcp: 3 numbers, the kernel prints at least 13 (statvers 1.1)", func(t *testing.T, b *block) {
			if len(b.xprts) != 1 || b.xprts[0].proto != "" {
				t.Errorf("the unreadable lane must keep its position and be unexported: %+v", b.xprts)
			}
		}},
		{"tcp line of statvers 1.0 length under 1.1", "\tage:\t5\n\txprt:\ttcp 901 1 3 7 12 500 499 1 800 20\n", "at least 13 (statvers 1.1)", nil},
		{"no age line", "\tbytes:\t1 2 3 4 5 6 7 8\n", "no age: line", func(t *testing.T, b *block) {
			if b.hasAge {
				t.Error("age invented")
			}
		}},
		{"8-number per-op line: no errors field", "\tage:\t5\n\tper-op statistics\n\tREAD: 1 2 3 4 5 6 7 8\n", "", func(t *testing.T, b *block) {
			if _, ok := b.ops[0].get(opErrors); ok {
				t.Error("errors field invented for an 8-number line")
			}
			if n, ok := b.ops[0].get(opExecuteMs); !ok || n != 8 {
				t.Errorf("execute = %d %v", n, ok)
			}
		}},
		{"negative sum printed unsigned", "\tage:\t5\n\tper-op statistics\n\tREAD: 1 2 3 4 5 6 7 18446743919241604546 0\n", "", func(t *testing.T, b *block) {
			if _, ok := b.ops[0].get(opExecuteMs); ok {
				t.Error("an implausible sum is exported")
			}
			if n, ok := b.ops[0].get(opRTTMs); !ok || n != 7 {
				t.Error("the plausible fields of the line must stay")
			}
			if bad := b.implausible(); len(bad) != 1 || !strings.Contains(bad[0], "per-op READ field 8 = 18446743919241604546") {
				t.Errorf("implausible() = %v", bad)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := head + tc.body
			blocks, errs := parseMountstats([]byte(text))
			if len(blocks) != 1 {
				t.Fatalf("%d blocks", len(blocks))
			}
			switch {
			case tc.wantErr == "" && len(errs) != 0:
				t.Errorf("errors: %v", errs)
			case tc.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr)):
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, blocks[0])
			}
		})
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`10.0.0.1:/a\040b`: "10.0.0.1:/a b",
		`/mnt/x\134y\011z`: "/mnt/x\\y\tz",
		`trailing\04`:      `trailing\04`,
		`plain`:            "plain",
		`\040\040`:         "  ",
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseMountstats: the fallback parser never panics, returns a mount
// per well-formed header, and keeps every lane position.
func FuzzParseMountstats(f *testing.F) {
	for _, name := range []string{"mountstats-nfs4.2-nconnect4", "mountstats-nfs3-tcp", "mountstats-mixed",
		"mountstats-real-6.1", "mountstats-oldkernel-transports", "mountstats-future"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte("device a:/b mounted on /c with fstype nfs statvers=1.1\n\txprt:\trdma 0 1\n\txprt:\n\tper-op statistics\n\tX:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		blocks, _ := parseMountstats(data)
		headers := 0
		for _, line := range strings.Split(string(data), "\n") {
			ss := strings.Fields(line)
			if len(ss) >= 9 && ss[0] == "device" && !strings.HasPrefix(line, "\t") &&
				ss[2] == "mounted" && ss[3] == "on" && ss[5] == "with" && ss[6] == "fstype" &&
				(ss[7] == "nfs" || ss[7] == "nfs4") && strings.HasPrefix(ss[8], "statvers=") {
				headers++
			}
		}
		if len(blocks) != headers {
			t.Fatalf("%d blocks for %d NFS headers", len(blocks), headers)
		}
		namer, _ := nfsvolume.New(`([^/]+)/*$`)
		keys, _ := superblockKeys("", blocks)
		vols := buildVolumes(blocks, keys, namer, 2049)
		totals := newHistory().totals(vols)
		seen := map[string]bool{}
		for _, v := range vols {
			if seen[v.id] {
				t.Fatalf("duplicate volume_id %q", v.id)
			}
			seen[v.id] = true
		}
		if len(totals) != len(vols) {
			t.Fatalf("%d totals for %d volumes", len(totals), len(vols))
		}
		joinSockets(vols, nil, 2049)
	})
}

func FuzzUnescapeOctal(f *testing.F) {
	f.Add(`a\040b\134`)
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescapeOctal(s); len(got) > len(s) {
			t.Fatalf("grew: %q -> %q", s, got)
		}
	})
}
