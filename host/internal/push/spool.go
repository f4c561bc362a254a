package push

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"

	"github.com/plexporter/plexporter/host/internal/config"
)

// spool keeps every queued snapshot on disk, one file each, until its
// samples are sent or dropped, so that a restart or a crash loses
// nothing: the next run sends the files it finds first, oldest first. A
// file holds the snapshot as the bodies of the requests that send it,
// byte for byte as they are posted (remote write: snappy-compressed
// protobuf; OTLP: gzipped protobuf), so what a restart sends is what the
// run that took the snapshot would have sent: an OTLP counter's start
// time, a remote write 2.0 request's symbols are in the body. The file
// name holds the protocol (.rw1, .rw2, .otlp). The spool is bounded by
// bytes and by age (a receiver without an out-of-order window rejects
// what is much older than what it has). Every error is counted and
// logged, never fatal: a snapshot that cannot be written stays in memory
// only.
type spool struct {
	dir      string
	ext      string // of the pusher's protocol
	maxBytes int64
	maxAge   time.Duration
	files    []spoolFile // oldest first
	bytes    int64
	seq      int
}

type spoolFile struct {
	name    string // <ts>-<seq>-<samples><ext>
	ts      int64  // milliseconds
	samples int
	size    int64
}

// spoolExts are the file name endings of the protocols' spool files.
var spoolExts = map[string]string{
	config.PushRemoteWriteV1: ".rw1",
	config.PushRemoteWriteV2: ".rw2",
	config.PushOTLP:          ".otlp",
}

// spoolMagic starts a spool file: the frames follow, each the sample
// count (uvarint), the body's length (uvarint) and the body. A .rw1 file
// without it is an earlier version's: one remote write 1.0 request of
// the whole snapshot (protobuf, snappy).
const spoolMagic = "PXSPOOL\x01"

// frame is one request of a snapshot: its body as posted and how many
// samples it carries.
type frame struct {
	samples int
	body    []byte
}

// openSpool opens (making it, mode 0700) the spool directory and lists
// the files a previous run left, oldest first: those of protocol (s.files)
// and those of other protocols, by protocol. Temporary files of an
// interrupted write are removed.
func openSpool(dir, protocol string, maxBytes int64, maxAge time.Duration) (*spool, map[string][]spoolFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("push spool directory %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("push spool directory %s: %w", dir, err)
	}
	s := &spool{dir: dir, ext: spoolExts[protocol], maxBytes: maxBytes, maxAge: maxAge}
	others := map[string][]spoolFile{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		ext := filepath.Ext(name)
		proto := ""
		for p, x := range spoolExts {
			if x == ext {
				proto = p
			}
		}
		if !e.Type().IsRegular() || proto == "" {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(name, ext), "-")
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
		f := spoolFile{name: name, ts: ts, samples: samples, size: info.Size()}
		if proto != protocol {
			others[proto] = append(others[proto], f)
			continue
		}
		s.files = append(s.files, f)
		s.bytes += f.size
	}
	slices.SortFunc(s.files, func(a, b spoolFile) int { return strings.Compare(a.name, b.name) })
	return s, others, nil
}

// name returns the file name of a snapshot of n samples taken at ts.
// Called with the pusher's lock held, as add and remove are.
func (s *spool) name(ts int64, n int) spoolFile {
	s.seq++
	return spoolFile{name: fmt.Sprintf("%020d-%06d-%d%s", ts, s.seq%1_000_000, n, s.ext), ts: ts, samples: n}
}

// store writes frames as f, whole or not at all: to a temporary name,
// fsynced, then renamed. It touches no state of s, so it runs without
// the pusher's lock (an fsync may take long, and /metrics reads the
// pusher's self-metrics under that lock).
func (s *spool) store(f spoolFile, frames []frame) (spoolFile, error) {
	size := len(spoolMagic)
	for _, fr := range frames {
		size += 2*binary.MaxVarintLen64 + len(fr.body)
	}
	data := make([]byte, 0, size)
	data = append(data, spoolMagic...)
	for _, fr := range frames {
		data = binary.AppendUvarint(data, uint64(fr.samples))
		data = binary.AppendUvarint(data, uint64(len(fr.body)))
		data = append(data, fr.body...)
	}
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

// read loads a file's frames. An earlier version's .rw1 file (one
// request of the whole snapshot) is cut into requests of at most perSend
// samples.
func (s *spool) read(f spoolFile, perSend int) ([]frame, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, f.name))
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(spoolMagic)) {
		if s.ext != spoolExts[config.PushRemoteWriteV1] {
			return nil, errors.New("not a spool file (no header)")
		}
		return readWholeRW1(data, perSend)
	}
	r := bufio.NewReader(bytes.NewReader(data[len(spoolMagic):]))
	var frames []frame
	for {
		n, err := binary.ReadUvarint(r)
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", len(frames), err)
		}
		size, err := binary.ReadUvarint(r)
		if err != nil || size > uint64(len(data)) {
			return nil, fmt.Errorf("frame %d: bad length", len(frames))
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("frame %d: %w", len(frames), err)
		}
		frames = append(frames, frame{samples: int(n), body: body})
	}
}

// readWholeRW1 reads an earlier version's .rw1 file.
func readWholeRW1(data []byte, perSend int) ([]frame, error) {
	raw, err := snappy.Decode(nil, data)
	if err != nil {
		return nil, err
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		return nil, err
	}
	var frames []frame
	for off := 0; off < len(req.Timeseries); {
		n := min(perSend, len(req.Timeseries)-off)
		raw, err := (&prompb.WriteRequest{Timeseries: req.Timeseries[off : off+n]}).Marshal()
		if err != nil {
			return nil, err
		}
		frames = append(frames, frame{samples: n, body: snappy.Encode(nil, raw)})
		off += n
	}
	return frames, nil
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

// rawMessage is an encoded protobuf message that client_golang's remote
// write client takes as it is (it marshals through the gogo-style Size
// and MarshalToSizedBuffer methods) and compresses as it does every
// request: a spooled remote write body, snappy-decoded.
type rawMessage []byte

func (m rawMessage) Size() int                                  { return len(m) }
func (m rawMessage) MarshalToSizedBuffer(b []byte) (int, error) { return copy(b, m), nil }

// rw2Message is a spooled remote write 2.0 body, snappy-decoded.
type rw2Message struct{ rawMessage }

// otlpGzipped is a spooled OTLP body, posted as it is.
type otlpGzipped []byte

// request returns what send posts for fr, a frame of protocol.
func (fr frame) request(protocol string) (any, error) {
	if protocol == config.PushOTLP {
		return otlpGzipped(fr.body), nil
	}
	raw, err := snappy.Decode(nil, fr.body)
	if err != nil {
		return nil, err
	}
	if protocol == config.PushRemoteWriteV2 {
		return rw2Message{rawMessage(raw)}, nil
	}
	return rawMessage(raw), nil
}

// otlpPosted is the body of req, an OTLP request or a spooled one.
func otlpPosted(req any) ([]byte, error) {
	if b, ok := req.(otlpGzipped); ok {
		return b, nil
	}
	return otlpBody(req.(*colmetricpb.ExportMetricsServiceRequest))
}

// startsFile holds, between a clean shutdown and the next start, the
// start times of OTLP counters (spool directory, OTLP only).
const startsFile = "otlp-starts"

// counterStart is a counter series' start time (ms) and last value.
type counterStart struct {
	start int64
	prev  float64
}

// saveStarts writes starts (by series key): per series its key's length
// (uvarint), the key, the start (uvarint) and the last value (float64
// bits, little endian); whole or not at all.
func (s *spool) saveStarts(starts map[string]counterStart) error {
	data := []byte(spoolMagic)
	for k, st := range starts {
		data = binary.AppendUvarint(data, uint64(len(k)))
		data = append(data, k...)
		data = binary.AppendUvarint(data, uint64(st.start))
		data = binary.LittleEndian.AppendUint64(data, math.Float64bits(st.prev))
	}
	tmp := filepath.Join(s.dir, startsFile+".tmp")
	if err := writeSync(tmp, data); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, startsFile)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// loadStarts reads and removes what saveStarts wrote (nil, nil: none):
// it is the last run's state, once.
func (s *spool) loadStarts() (map[string]counterStart, error) {
	path := filepath.Join(s.dir, startsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	os.Remove(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(spoolMagic)) {
		return nil, errors.New("no header")
	}
	data = data[len(spoolMagic):]
	starts := map[string]counterStart{}
	for len(data) > 0 {
		n, w := binary.Uvarint(data)
		if w <= 0 || uint64(len(data)-w) < n {
			return nil, errors.New("truncated")
		}
		k := string(data[w : w+int(n)])
		data = data[w+int(n):]
		start, w := binary.Uvarint(data)
		if w <= 0 || len(data)-w < 8 {
			return nil, errors.New("truncated")
		}
		prev := math.Float64frombits(binary.LittleEndian.Uint64(data[w:]))
		data = data[w+8:]
		starts[k] = counterStart{start: int64(start), prev: prev}
	}
	return starts, nil
}
