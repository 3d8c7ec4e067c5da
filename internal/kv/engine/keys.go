package engine

import (
	"bytes"

	"github.com/flashmend/flashmend/internal/kv/keyspan"
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
	// wholeStart and wholeEnd bound every key a state machine holds
	// (both applied copies and the user key space).
	wholeStart = []byte{0}
	wholeEnd   = []byte{0x7f}
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

// Range is a user key range [Start, End); an empty End is unbounded
// (internal/kv/keyspan owns it and its set operations).
type Range = keyspan.Range
