package engine

import (
	"bytes"
	"fmt"
)

// Pebble key layout of a replica's state machine: user keys live under
// UserPrefix so that the replica's own metadata (appliedKey) sorts before
// them and excise spans never touch it.
var (
	appliedKey = []byte("\x00applied")
	// appliedKey2 holds a second copy of the applied record at the other
	// end of the key space (after UserEnd), so the two land in different
	// data blocks and one damaged block cannot take both.
	appliedKey2 = []byte("~applied")
	UserPrefix  = []byte("u")
	UserEnd     = []byte("v") // exclusive end of the user key space
)

func UserKey(k []byte) []byte {
	out := make([]byte, 0, len(UserPrefix)+len(k))
	return append(append(out, UserPrefix...), k...)
}

// FromUserKey strips the prefix; ok is false for metadata keys.
func FromUserKey(k []byte) ([]byte, bool) {
	if !bytes.HasPrefix(k, UserPrefix) {
		return nil, false
	}
	return k[len(UserPrefix):], true
}

// PebbleSpan maps a user range [start, end) (end empty = unbounded) to the
// Pebble key space.
func PebbleSpan(start, end []byte) ([]byte, []byte) {
	s := UserKey(start)
	if len(end) == 0 {
		return s, append([]byte(nil), UserEnd...)
	}
	return s, UserKey(end)
}

// Range is a user key range [Start, End); an empty End is unbounded.
type Range struct {
	Start, End []byte
}

func (r Range) String() string {
	if len(r.End) == 0 {
		return fmt.Sprintf("[%q, +inf)", r.Start)
	}
	return fmt.Sprintf("[%q, %q)", r.Start, r.End)
}

// Contains reports whether k is in r.
func (r Range) Contains(k []byte) bool {
	return bytes.Compare(k, r.Start) >= 0 && (len(r.End) == 0 || bytes.Compare(k, r.End) < 0)
}

// Overlaps reports whether r and o share a key.
func (r Range) Overlaps(o Range) bool {
	return (len(o.End) == 0 || bytes.Compare(r.Start, o.End) < 0) &&
		(len(r.End) == 0 || bytes.Compare(o.Start, r.End) < 0)
}
