package objstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/invariants"
)

// MetaCopies is how many copies of every local metadata file a node keeps
// (DIRECT 000 section 4.2.2 duplicates metadata; three copies let a read
// tell a stale copy from a corrupt one by majority and survive two bad ones).
const MetaCopies = 3

const metaMagic = 0x464d4d54 // "FMMT"

// MetaFiles stores small metadata files in MetaCopies copies, each with a
// header carrying a sequence number and a CRC32C. Reading returns the valid
// copy with the highest sequence number and rewrites any copy that is
// missing, corrupt or stale; when no copy verifies, a bit-by-bit majority
// vote over the three copies is used if it verifies. Copies are separate files so that, on flash,
// they land on separate pages, and on a store that places copies
// (CopyPlacer) on separate channels, so one failed die holds at most one.
type MetaFiles struct {
	store Store
}

// NewMetaFiles returns metadata files kept in store.
func NewMetaFiles(store Store) *MetaFiles { return &MetaFiles{store: store} }

func metaCopyName(name string, i int) string { return fmt.Sprintf("%s.m%d", name, i) }

func encodeMeta(seq uint64, payload []byte) []byte {
	b := make([]byte, 0, 20+len(payload))
	b = binary.LittleEndian.AppendUint32(b, metaMagic)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, base.CRC32C(b))
}

func decodeMeta(b []byte) (seq uint64, payload []byte, ok bool) {
	if len(b) < 20 {
		return 0, nil, false
	}
	body := b[:len(b)-4]
	if base.CRC32C(body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, false
	}
	if binary.LittleEndian.Uint32(body) != metaMagic || int(binary.LittleEndian.Uint32(body[12:])) != len(body)-16 {
		return 0, nil, false
	}
	return binary.LittleEndian.Uint64(body[4:]), body[16:], true
}

// MetaReadResult reports what a metadata read found.
type MetaReadResult struct {
	Payload []byte
	Seq     uint64
	// Repaired is the number of copies that were missing, corrupt or stale
	// and were rewritten.
	Repaired int
}

// Read returns the newest valid copy of name and rewrites the others. When
// no copy exists the error wraps ErrNotFound; when copies exist but none is
// valid it is a data-loss error.
func (m *MetaFiles) Read(name string) (MetaReadResult, error) {
	var res MetaReadResult
	var copies [MetaCopies][]byte
	valid := [MetaCopies]bool{}
	found, best := 0, -1
	var readErr error // the first copy the store could not read
	for i := range copies {
		b, err := m.store.Get(metaCopyName(name, i))
		if err != nil {
			if IsNotFound(err) {
				continue
			}
			// A copy the store cannot read (a failed die, a bad sector's
			// EIO): invalid, rewritten from a good one below. Only when no
			// copy is good does its error decide the result.
			found++
			if readErr == nil && !base.IsCorruption(err) {
				readErr = fmt.Errorf("meta %s copy %d: %w", name, i, err)
			}
			continue
		}
		found++
		copies[i] = b
		seq, payload, ok := decodeMeta(b)
		if !ok {
			continue
		}
		valid[i] = true
		if best < 0 || seq > res.Seq {
			best, res.Seq, res.Payload = i, seq, payload
		}
	}
	if found == 0 {
		return res, fmt.Errorf("meta %s: %w", name, ErrNotFound)
	}
	var good []byte
	if best < 0 {
		// No copy verifies: vote bit by bit over three copies of the same
		// length (damage in different bits of each), and use the result
		// only if it verifies.
		if readErr != nil {
			// Not known to be lost: the device failed to read a copy.
			return res, readErr
		}
		if found < MetaCopies || len(copies[0]) != len(copies[1]) || len(copies[0]) != len(copies[2]) {
			return res, base.DataLossErrorf("meta %s: all %d copies corrupt", name, found)
		}
		voted := direct.MajorityVote(copies[:])
		seq, payload, ok := decodeMeta(voted)
		if !ok {
			return res, base.DataLossErrorf("meta %s: all %d copies corrupt and their majority vote does not verify", name, found)
		}
		good, res.Seq, res.Payload = voted, seq, payload
	} else {
		good = copies[best]
	}
	for i := range copies {
		if valid[i] && string(copies[i]) == string(good) {
			continue
		}
		if err := m.putCopy(name, i, good); err != nil {
			return res, fmt.Errorf("meta %s: rewrite copy %d: %w", name, i, err)
		}
		res.Repaired++
	}
	return res, nil
}

// Write stores payload as the new version of name in all copies.
func (m *MetaFiles) Write(name string, payload []byte) error {
	var seq uint64
	if cur, err := m.Read(name); err == nil {
		seq = cur.Seq + 1
	} else if !IsNotFound(err) && !base.IsDataLoss(err) {
		return err
	}
	return m.write(name, seq, payload)
}

// WriteNew stores payload as the first version of name without reading
// existing copies: for files written once (a rewrite of the same content
// is harmless).
func (m *MetaFiles) WriteNew(name string, payload []byte) error { return m.write(name, 0, payload) }

func (m *MetaFiles) write(name string, seq uint64, payload []byte) error {
	rec := encodeMeta(seq, payload)
	if invariants.Enabled {
		// Checksum before the write: the record decodes back to what it
		// stores (Read verifies every copy it reads).
		s, p, ok := decodeMeta(rec)
		_ = invariants.Check(ok && s == seq && bytes.Equal(p, payload), "objstore: meta %s does not decode back before its write", name)
	}
	for i := 0; i < MetaCopies; i++ {
		if err := m.putCopy(name, i, rec); err != nil {
			return fmt.Errorf("meta %s: write copy %d: %w", name, i, err)
		}
		crashpoint.HitIf(i < MetaCopies-1, "meta-copy")
	}
	return nil
}

// putCopy writes copy i of name, apart from the others where the store
// can place copies (CopyPlacer: on SDF, channels that share no die).
func (m *MetaFiles) putCopy(name string, i int, rec []byte) error {
	if cp, ok := m.store.(CopyPlacer); ok {
		return cp.PutCopy(metaCopyName(name, i), rec, name, i)
	}
	return m.store.Put(metaCopyName(name, i), rec)
}

// Delete removes every copy of name.
func (m *MetaFiles) Delete(name string) error {
	for i := 0; i < MetaCopies; i++ {
		if err := m.store.Delete(metaCopyName(name, i)); err != nil {
			return err
		}
	}
	return nil
}

// CopyNames returns the file names of name's copies (for fault injection).
func CopyNames(name string) []string {
	out := make([]string, MetaCopies)
	for i := range out {
		out[i] = metaCopyName(name, i)
	}
	return out
}
