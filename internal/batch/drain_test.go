package batch

import (
	"errors"
	"io"
	"testing"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

type fakeStream struct {
	msgs []*pluginv1.CollectResponse
	end  error
}

func (f *fakeStream) Recv() (*pluginv1.CollectResponse, error) {
	if len(f.msgs) == 0 {
		return nil, f.end
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

func TestDrain(t *testing.T) {
	b1, b2 := &pluginv1.Batch{Strings: []string{""}}, &pluginv1.Batch{Strings: []string{"", "x"}}
	e1, e2 := &pluginv1.CollectError{Collector: "a"}, &pluginv1.CollectError{Collector: "b"}
	msgs := []*pluginv1.CollectResponse{
		{Batch: b1},
		{Errors: []*pluginv1.CollectError{e1}},
		{Batch: b2, Errors: []*pluginv1.CollectError{e2}},
	}
	broken := errors.New("stream broke")
	for _, tc := range []struct {
		name    string
		end     error
		wantErr error
	}{
		{"eof", io.EOF, nil},
		{"broken stream keeps what arrived", broken, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches, errs, err := Drain(&fakeStream{msgs: append([]*pluginv1.CollectResponse(nil), msgs...), end: tc.end})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(batches) != 2 || batches[0] != b1 || batches[1] != b2 {
				t.Errorf("batches = %v, want [b1 b2]", batches)
			}
			if len(errs) != 2 || errs[0] != e1 || errs[1] != e2 {
				t.Errorf("errors = %v, want [e1 e2]", errs)
			}
		})
	}
	if b, e, err := Drain(&fakeStream{end: io.EOF}); len(b)+len(e) != 0 || err != nil {
		t.Errorf("empty stream: %v %v %v", b, e, err)
	}
}
