package trail

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grantretry/grantretry"
)

// trailHead is the head file: the last synced record. It is replaced whole
// (a temporary file, synced, renamed over it), so a crash leaves the old
// head or the new one, never a torn one. Only Sync and Close write it, not
// a rotation.
type trailHead struct {
	Version int    `json:"version"`
	Seq     uint64 `json:"seq"`
	Hash    string `json:"hash"`
	// File is the base name of the live file when the head was written,
	// which held the record then; a later rotation may have moved the
	// record to a rotated file, FILE.NNNNNN, without changing the head.
	File string `json:"file"`
}

// writeTrailHead replaces the head file. The directory is not synced: after a
// crash the old head may be back, which claims less, never more, than is
// durable.
func writeTrailHead(path string, seq uint64, hash *[32]byte, file string) error {
	data, err := json.Marshal(trailHead{Version: Version, Seq: seq, Hash: hex.EncodeToString(hash[:]), File: file})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, trailPerm)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readTrailHead reads the head file at path; nil if there is none.
func readTrailHead(path string) (*trailHead, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	var h trailHead
	var sum [32]byte
	if err := json.Unmarshal(data, &h); err != nil || h.Seq == 0 || len(h.Hash) != 64 {
		return nil, &Error{File: path, Problem: "not a head file (a JSON object with seq and hash)"}
	}
	if _, err := hex.Decode(sum[:], []byte(h.Hash)); err != nil {
		return nil, &Error{File: path, Problem: "the head's hash is not hex"}
	}
	return &h, nil
}

// Head is what a trail's head file says: the last record that Sync or
// Close made durable.
type Head struct {
	Seq  uint64
	Hash [32]byte
}

// ReadHead reads the head file of the trail whose live file is live
// (live.head). Every record up to the head's survives a power loss; a
// record after it may not, and the trail reopened after one goes on from
// its last synced record, writing other records under the seqs of those
// lost. So a reader that copies the trail elsewhere, as a write-once
// shipper does, copies only up to the head. ok is false when the trail
// has no head file: no record of it was synced yet, or it was not written
// by [Open]. An error matches [grantretry.ErrAuditTrail].
func ReadHead(live string) (h Head, ok bool, err error) {
	th, err := readTrailHead(trailBase(filepath.Clean(live)) + ".head")
	if err != nil || th == nil {
		return Head{}, false, err
	}
	h.Seq = th.Seq
	hex.Decode(h.Hash[:], []byte(th.Hash)) // checked by readTrailHead
	return h, true, nil
}
