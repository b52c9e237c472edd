package worm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/grantretry/grantretry/trail"
)

// The disk queue: a folder per stream under the queue directory, holding
// the sealed segments not yet anchored, FIRST-LAST.seg (the segment's
// bytes, written whole: a temporary file, synced, renamed), and state.json,
// the last record sealed, so that a shipper that restarts while the store
// is down knows where the stream stands.
const (
	queueExt   = ".seg"
	stateFile  = "state.json"
	queuePerm  = 0o700
	queueFPerm = 0o600
)

// queued is a sealed segment waiting for its upload.
type queued struct {
	stream      string
	first, last uint64
	prev, hash  [32]byte // prev of its first record, hash of its last
	records     int
	readAt      time.Time // when its first record was read
	path        string    // its file in the queue
}

type queueState struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

func streamDir(dir, stream string) string { return filepath.Join(dir, stream) }

// enqueue writes a sealed segment to the queue and records it as the last
// sealed.
func enqueue(dir string, q *queued, data []byte) error {
	sd := streamDir(dir, q.stream)
	if err := os.MkdirAll(sd, queuePerm); err != nil {
		return err
	}
	q.path = filepath.Join(sd, pad(q.first)+"-"+pad(q.last)+queueExt)
	if err := writeWhole(q.path, data); err != nil {
		return err
	}
	st, _ := json.Marshal(queueState{Seq: q.last, Hash: hexHash(q.hash)})
	return writeWhole(filepath.Join(sd, stateFile), append(st, '\n'))
}

// writeWhole replaces path with data: a crash leaves the old file or the
// new one.
func writeWhole(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, queueFPerm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadQueue reads what the queue holds for every stream: the segments
// waiting, in seq order, and the last record sealed.
func loadQueue(dir string) (map[string][]*queued, map[string]chainState, error) {
	segs, states := map[string][]*queued{}, map[string]chainState{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return segs, states, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || checkStream(e.Name()) != nil {
			continue
		}
		stream := e.Name()
		sd := streamDir(dir, stream)
		if b, err := os.ReadFile(filepath.Join(sd, stateFile)); err == nil {
			var qs queueState
			var h [32]byte
			if json.Unmarshal(b, &qs) != nil || qs.Seq == 0 || hexDecode(h[:], qs.Hash) != nil {
				return nil, nil, fmt.Errorf("%s: not a queue state", filepath.Join(sd, stateFile))
			}
			states[stream] = chainState{seq: qs.Seq, hash: h}
		}
		files, err := os.ReadDir(sd)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			q, err := loadQueued(sd, stream, f)
			if err != nil {
				return nil, nil, err
			}
			if q != nil {
				segs[stream] = append(segs[stream], q)
			}
		}
		sort.Slice(segs[stream], func(i, j int) bool { return segs[stream][i].first < segs[stream][j].first })
		if n := len(segs[stream]); n > 0 && segs[stream][n-1].last > states[stream].seq {
			last := segs[stream][n-1]
			states[stream] = chainState{seq: last.last, hash: last.hash}
		}
	}
	return segs, states, nil
}

// loadQueued reads the queued segment f of stream's folder sd; nil if f
// is not one.
func loadQueued(sd, stream string, f os.DirEntry) (*queued, error) {
	name, ok := strings.CutSuffix(f.Name(), queueExt)
	a, b, ok2 := strings.Cut(name, "-")
	if !ok || !ok2 {
		return nil, nil
	}
	first, err1 := strconv.ParseUint(a, 10, 64)
	last, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	path := filepath.Join(sd, f.Name())
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	q := &queued{stream: stream, first: first, last: last, path: path}
	if fi, err := f.Info(); err == nil {
		q.readAt = fi.ModTime()
	}
	for off := 0; off < len(data); {
		n := bytes.IndexByte(data[off:], '\n')
		if n < 0 {
			return nil, fmt.Errorf("%s: a queued segment ends mid-record", path)
		}
		l, ok := trail.ParseLink(data[off : off+n])
		if !ok {
			return nil, fmt.Errorf("%s: a queued segment holds a line that is not a record", path)
		}
		if q.records == 0 {
			q.prev = l.Prev
		}
		q.hash = l.Hash
		q.records++
		off += n + 1
	}
	if q.records == 0 {
		return nil, fmt.Errorf("%s: an empty queued segment", path)
	}
	return q, nil
}

func hexDecode(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return errors.New("wrong length")
	}
	_, err := hex.Decode(dst, []byte(s))
	return err
}
