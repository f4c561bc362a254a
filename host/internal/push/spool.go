package push

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// spool keeps every queued snapshot on disk, one file each (a remote
// write 1.0 request, protobuf and snappy, as it would be posted), until
// its samples are sent or dropped, so that a restart or a crash loses
// nothing: the next run sends the files it finds first, oldest first. It
// is bounded by bytes and by age (a receiver without an out-of-order
// window rejects what is much older than what it has). Every error is
// counted and logged, never fatal: a snapshot that cannot be written
// stays in memory only.
type spool struct {
	dir      string
	maxBytes int64
	maxAge   time.Duration
	files    []spoolFile // oldest first
	bytes    int64
	seq      int
}

type spoolFile struct {
	name    string // <ts>-<seq>-<samples>.rw1
	ts      int64  // milliseconds
	samples int
	size    int64
}

const spoolExt = ".rw1"

// openSpool opens (making it, mode 0700) the spool directory and lists
// the files a previous run left, oldest first. Temporary files of an
// interrupted write are removed.
func openSpool(dir string, maxBytes int64, maxAge time.Duration) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("push spool directory %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("push spool directory %s: %w", dir, err)
	}
	s := &spool{dir: dir, maxBytes: maxBytes, maxAge: maxAge}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		if !e.Type().IsRegular() || !strings.HasSuffix(name, spoolExt) {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(name, spoolExt), "-")
		if len(parts) != 3 {
			continue
		}
		ts, err1 := strconv.ParseInt(parts[0], 10, 64)
		samples, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		s.files = append(s.files, spoolFile{name: name, ts: ts, samples: samples, size: info.Size()})
		s.bytes += info.Size()
	}
	slices.SortFunc(s.files, func(a, b spoolFile) int { return strings.Compare(a.name, b.name) })
	return s, nil
}

// name returns the file name of a snapshot of n samples taken at ts.
// Called with the pusher's lock held, as add and remove are.
func (s *spool) name(ts int64, n int) spoolFile {
	s.seq++
	return spoolFile{name: fmt.Sprintf("%020d-%06d-%d%s", ts, s.seq%1_000_000, n, spoolExt), ts: ts, samples: n}
}

// store writes raw, an encoded write request, as f (snappy), whole or not
// at all: to a temporary name, fsynced, then renamed. It touches no state
// of s, so it runs without the pusher's lock (an fsync may take long, and
// /metrics reads the pusher's self-metrics under that lock).
func (s *spool) store(f spoolFile, raw []byte) (spoolFile, error) {
	data := snappy.Encode(nil, raw)
	f.size = int64(len(data))
	tmp := filepath.Join(s.dir, f.name+".tmp")
	if err := writeSync(tmp, data); err != nil {
		os.Remove(tmp)
		return spoolFile{}, err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, f.name)); err != nil {
		os.Remove(tmp)
		return spoolFile{}, err
	}
	return f, nil
}

// add records f, stored.
func (s *spool) add(f spoolFile) {
	s.files = append(s.files, f)
	s.bytes += f.size
}

func writeSync(path string, data []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if err == nil {
		err = fh.Sync()
	}
	return errors.Join(err, fh.Close())
}

// read loads a file's request.
func (s *spool) read(f spoolFile) (*prompb.WriteRequest, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, f.name))
	if err != nil {
		return nil, err
	}
	raw, err := snappy.Decode(nil, data)
	if err != nil {
		return nil, err
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		return nil, err
	}
	return &req, nil
}

// remove deletes f (sent or dropped).
func (s *spool) remove(f spoolFile) {
	i := slices.IndexFunc(s.files, func(g spoolFile) bool { return g.name == f.name })
	if i < 0 {
		return
	}
	os.Remove(filepath.Join(s.dir, f.name))
	s.bytes -= s.files[i].size
	s.files = slices.Delete(s.files, i, i+1)
}
