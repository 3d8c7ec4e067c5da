package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// Digest is a state machine's running summary of its user rows: their
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
type Digest struct {
	rows, sum, xor uint64
	Dirty          bool
}

func (d Digest) String() string {
	if d.Dirty {
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

func (d *Digest) add(key, value []byte) {
	h := rowHash(key, value)
	d.rows++
	d.sum += h
	d.xor ^= h
}

func (d *Digest) remove(key, value []byte) {
	h := rowHash(key, value)
	d.rows--
	d.sum -= h
	d.xor ^= h
}

// Same compares the row summaries (both must be known).
func (d Digest) Same(o Digest) bool {
	return !d.Dirty && !o.Dirty && d.rows == o.rows && d.sum == o.sum && d.xor == o.xor
}

func DigestOf(rows []*kvpb.KeyValue) Digest {
	var d Digest
	for _, kv := range rows {
		d.add(kv.Key, kv.Value)
	}
	return d
}

func (d Digest) ToProto() *kvpb.Summary {
	if d.Dirty {
		return nil
	}
	return &kvpb.Summary{Rows: d.rows, Sum: d.sum, Xor: d.xor}
}

func DigestFromProto(s *kvpb.Summary) Digest {
	if s == nil {
		return Digest{Dirty: true}
	}
	return Digest{rows: s.Rows, sum: s.Sum, xor: s.Xor}
}

// AppliedState is the state machine's own record, stored under appliedKey
// in the same batch (or after the same ingest) as the effects of the entry
// it names: the applied index and term and the Digest at that index.
//
// Layout, big endian: index u64 | term u64 | rows u64 | sum u64 | xor u64 |
// flags u8 (1: Digest dirty) | CRC32C of the preceding 41 bytes u32.
type AppliedState struct {
	Index, Term uint64
	Digest      Digest
}

const appliedStateBytes = 8*5 + 1 + 4

func (a AppliedState) encode() []byte {
	b := make([]byte, 0, appliedStateBytes)
	b = binary.BigEndian.AppendUint64(b, a.Index)
	b = binary.BigEndian.AppendUint64(b, a.Term)
	b = binary.BigEndian.AppendUint64(b, a.Digest.rows)
	b = binary.BigEndian.AppendUint64(b, a.Digest.sum)
	b = binary.BigEndian.AppendUint64(b, a.Digest.xor)
	var flags byte
	if a.Digest.Dirty {
		flags = 1
	}
	b = append(b, flags)
	return binary.BigEndian.AppendUint32(b, base.CRC32C(b))
}

func DecodeAppliedState(v []byte) (AppliedState, error) {
	if len(v) != appliedStateBytes {
		return AppliedState{}, base.CorruptionErrorf("kv: applied record of %d bytes, want %d", len(v), appliedStateBytes)
	}
	if got, want := base.CRC32C(v[:appliedStateBytes-4]), binary.BigEndian.Uint32(v[appliedStateBytes-4:]); got != want {
		return AppliedState{}, base.CorruptionErrorf("kv: applied record fails its checksum")
	}
	return AppliedState{
		Index: binary.BigEndian.Uint64(v[0:]),
		Term:  binary.BigEndian.Uint64(v[8:]),
		Digest: Digest{
			rows: binary.BigEndian.Uint64(v[16:]), sum: binary.BigEndian.Uint64(v[24:]), xor: binary.BigEndian.Uint64(v[32:]),
			Dirty: v[40]&1 != 0,
		},
	}, nil
}
