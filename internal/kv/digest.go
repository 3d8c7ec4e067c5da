package kv

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// digest is a state machine's running summary of its user rows: their
// count and two order-independent 64-bit combinations (wrapping sum and
// xor) of a hash of each row. The apply worker keeps it up to date with
// every write (the old value out, the new one in), so it is a function of
// the applied log, not of what the engine happens to hold: at open, and
// after a rebuild, a scan of the engine must reproduce it, or the engine
// lost or gained rows (a MANIFEST that went back in time, a dropped
// remainder of an excise) and must not serve them.
//
// A patch does not change it (it restores the same logical rows). A write
// whose old value cannot be read (it lies in a damaged block not yet
// patched) leaves it unknown (dirty) until the next rebuild: the replica
// then skips the check rather than guess.
type digest struct {
	rows, sum, xor uint64
	dirty          bool
}

func (d digest) String() string {
	if d.dirty {
		return "digest unknown"
	}
	return fmt.Sprintf("rows=%d sum=%016x xor=%016x", d.rows, d.sum, d.xor)
}

// rowHash hashes one row: key length, key, value.
func rowHash(key, value []byte) uint64 {
	h := xxhash.New()
	var l [binary.MaxVarintLen64]byte
	_, _ = h.Write(l[:binary.PutUvarint(l[:], uint64(len(key)))])
	_, _ = h.Write(key)
	_, _ = h.Write(value)
	return h.Sum64()
}

func (d *digest) add(key, value []byte) {
	h := rowHash(key, value)
	d.rows++
	d.sum += h
	d.xor ^= h
}

func (d *digest) remove(key, value []byte) {
	h := rowHash(key, value)
	d.rows--
	d.sum -= h
	d.xor ^= h
}

// same compares the row summaries (both must be known).
func (d digest) same(o digest) bool {
	return !d.dirty && !o.dirty && d.rows == o.rows && d.sum == o.sum && d.xor == o.xor
}

func digestOf(rows []*kvpb.KeyValue) digest {
	var d digest
	for _, kv := range rows {
		d.add(kv.Key, kv.Value)
	}
	return d
}

func (d digest) toProto() *kvpb.Summary {
	if d.dirty {
		return nil
	}
	return &kvpb.Summary{Rows: d.rows, Sum: d.sum, Xor: d.xor}
}

func digestFromProto(s *kvpb.Summary) digest {
	if s == nil {
		return digest{dirty: true}
	}
	return digest{rows: s.Rows, sum: s.Sum, xor: s.Xor}
}

// appliedState is the state machine's own record, stored under appliedKey
// in the same batch (or after the same ingest) as the effects of the entry
// it names: the applied index and term and the digest at that index.
//
// Layout, big endian: index u64 | term u64 | rows u64 | sum u64 | xor u64 |
// flags u8 (1: digest dirty) | CRC32C of the preceding 41 bytes u32.
type appliedState struct {
	index, term uint64
	digest      digest
}

const appliedStateBytes = 8*5 + 1 + 4

func (a appliedState) encode() []byte {
	b := make([]byte, 0, appliedStateBytes)
	b = binary.BigEndian.AppendUint64(b, a.index)
	b = binary.BigEndian.AppendUint64(b, a.term)
	b = binary.BigEndian.AppendUint64(b, a.digest.rows)
	b = binary.BigEndian.AppendUint64(b, a.digest.sum)
	b = binary.BigEndian.AppendUint64(b, a.digest.xor)
	var flags byte
	if a.digest.dirty {
		flags = 1
	}
	b = append(b, flags)
	return binary.BigEndian.AppendUint32(b, base.CRC32C(b))
}

func decodeAppliedState(v []byte) (appliedState, error) {
	if len(v) != appliedStateBytes {
		return appliedState{}, base.CorruptionErrorf("kv: applied record of %d bytes, want %d", len(v), appliedStateBytes)
	}
	if got, want := base.CRC32C(v[:appliedStateBytes-4]), binary.BigEndian.Uint32(v[appliedStateBytes-4:]); got != want {
		return appliedState{}, base.CorruptionErrorf("kv: applied record fails its checksum")
	}
	return appliedState{
		index: binary.BigEndian.Uint64(v[0:]),
		term:  binary.BigEndian.Uint64(v[8:]),
		digest: digest{
			rows: binary.BigEndian.Uint64(v[16:]), sum: binary.BigEndian.Uint64(v[24:]), xor: binary.BigEndian.Uint64(v[32:]),
			dirty: v[40]&1 != 0,
		},
	}, nil
}
