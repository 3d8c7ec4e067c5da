package engine

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Block merge: DIRECT's sector merge (paper 000 section 4.1.2, "the
// correct data is reconstructed from the uncorrupted parts of the
// replicas") applied to one sstable data block. Replicas that applied the
// same raft log usually wrote byte-identical tables (the same rows, flushed
// and compacted at the same points), so when the same data block is
// damaged on every replica (a key range no patch can bring back) the
// damage is almost always at different bytes of each copy, and the copies
// together still hold every byte. MergeBlock puts the block back together
// and the replica writes it over its damaged copy in place: the table is
// again exactly what Pebble wrote.
//
// A copy is only ever used if it is provably the same block as the
// replica's own: a peer's table of the same size is not necessarily the
// same table (a replica that ingested a patch numbers its rows
// differently), and a valid block from another table written into this one
// would be silent corruption. The rule (sameBlock): the result verifies
// against its checksum, and either its checksum is the one in the
// replica's own trailer and its data differs from the replica's own in at
// most maxMergeDiff bytes (the damage), or its data is the replica's own
// byte for byte (the damage was in the trailer).

// maxMergeDiff bounds how many bytes of a block a merge may change: flips
// at the UBERs flashmend is built for damage one or two bytes of a 4 KiB
// block; a copy that differs in more is another block.
const maxMergeDiff = 64

// maxMergeTrials bounds the combinations MergeBlock tries when no copy
// verifies and no majority exists: every trial is a chance that a wrong
// combination matches the 32-bit checksum, so the bound keeps that chance
// under 2^10 / 2^32 (about 2.4e-7) per merged block.
const maxMergeTrials = 1 << 10

// MergeBlock rebuilds block h (its data and 5-byte trailer, as read from
// the file) from the replica's own damaged copy and peers' copies, any of
// which may be damaged too. It returns the block and how it was found
// ("copy", "vote" or "combination"), or ok false.
func MergeBlock(h block.Handle, own []byte, others [][]byte) (merged []byte, how string, ok bool) {
	n := int(h.Length + block.TrailerLen)
	if len(own) != n {
		return nil, "", false
	}
	var copies [][]byte
	for _, c := range others {
		if len(c) == n && diffBytes(c, own) <= maxMergeDiff {
			copies = append(copies, c)
		}
	}
	for _, c := range copies {
		if sameBlock(h, own, c) {
			return bytes.Clone(c), "copy", true
		}
	}
	all := append([][]byte{own}, copies...)
	if len(all) >= 3 {
		v := vote(all)
		if sameBlock(h, own, v) {
			return v, "vote", true
		}
	}
	if len(all) >= 2 {
		if c, ok := combine(h, own, all); ok {
			return c, "combination", true
		}
	}
	return nil, "", false
}

// sameBlock reports whether c verifies and is provably the block own is a
// damaged copy of (see the package comment above).
func sameBlock(h block.Handle, own, c []byte) bool {
	if !blockChecksumOK(c, h) {
		return false
	}
	data := int(h.Length) + 1 // data and compression type
	if bytes.Equal(c[:data], own[:data]) {
		return true
	}
	return bytes.Equal(c[data:], own[data:]) && diffBytes(c, own) <= maxMergeDiff
}

// diffBytes counts the bytes where a and b (of equal length) differ.
func diffBytes(a, b []byte) int {
	d := 0
	for i := range a {
		if a[i] != b[i] {
			d++
		}
	}
	return d
}

// vote returns, byte by byte, the value most copies hold (the first
// copy's on a tie).
func vote(copies [][]byte) []byte {
	out := bytes.Clone(copies[0])
	for i := range out {
		best, bestN := out[i], 0
		for _, c := range copies {
			k := 0
			for _, d := range copies {
				if d[i] == c[i] {
					k++
				}
			}
			if k > bestN {
				best, bestN = c[i], k
			}
		}
		out[i] = best
	}
	return out
}

// combine tries, at the bytes where the copies disagree, every choice of
// one copy's value per byte, up to maxMergeTrials combinations.
func combine(h block.Handle, own []byte, copies [][]byte) ([]byte, bool) {
	type choice struct {
		at   int
		vals []byte
	}
	var diffs []choice
	trials := 1
	for i := range own {
		var vals []byte
		for _, c := range copies {
			if bytes.IndexByte(vals, c[i]) < 0 {
				vals = append(vals, c[i])
			}
		}
		if len(vals) > 1 {
			diffs = append(diffs, choice{at: i, vals: vals})
			if trials *= len(vals); trials > maxMergeTrials {
				return nil, false
			}
		}
	}
	cand := bytes.Clone(own)
	idx := make([]int, len(diffs))
	for t := 0; t < trials; t++ {
		for k, d := range diffs {
			cand[d.at] = d.vals[idx[k]]
		}
		if sameBlock(h, own, cand) {
			return cand, true
		}
		for k := range idx { // next combination
			if idx[k]++; idx[k] < len(diffs[k].vals) {
				break
			}
			idx[k] = 0
		}
	}
	return nil, false
}

// ReadBlock reads block h with its trailer from the file at path, as stored.
func ReadBlock(fs vfs.FS, path string, h block.Handle) ([]byte, error) {
	if h.Length > maxBlockBytes {
		return nil, fmt.Errorf("kv: block %d/%d of %s: larger than %d B", h.Offset, h.Length, path, maxBlockBytes)
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, h.Length+block.TrailerLen)
	if _, err := f.ReadAt(buf, int64(h.Offset)); err != nil {
		return nil, err
	}
	return buf, nil
}

// WriteBlock writes a merged block over the damaged copy at h.Offset of the
// file at path, syncs it, and checks that the block now reads back and
// verifies. Pebble never writes a table after creating it; what is written
// here is what it wrote (MergeBlock's rule), so readers that raced the
// write saw a damaged block (a checksum error, re-read) or the right one.
func WriteBlock(fs vfs.FS, path string, h block.Handle, b []byte) error {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, int64(h.Offset)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	ok, err := RereadBlock(fs, path, h)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("kv: block %d/%d of %s does not verify after it was written", h.Offset, h.Length, path)
	}
	return nil
}

// BlockHandle finds the data block at offset in the table at path (through
// its index, which must read).
func BlockHandle(fs vfs.FS, path string, offset uint64) (block.Handle, error) {
	r, err := openTable(fs, path, SSTReaderOptions())
	if err != nil {
		return block.Handle{}, err
	}
	defer r.Close()
	blocks, err := SSTDataBlocks(r)
	if err != nil {
		return block.Handle{}, Classify(err)
	}
	for _, b := range blocks {
		if b.h.Offset == offset {
			return b.h, nil
		}
	}
	return block.Handle{}, fmt.Errorf("kv: %s has no data block at offset %d", path, offset)
}

// BlockCopies returns the block at [offset, offset+length+trailer) of every
// live table of the engine whose file is tableSize bytes long, as stored
// (a peer's answer to FetchBlock).
func (sm *StateMachine) BlockCopies(tableSize, offset, length uint64) ([][]byte, error) {
	if length > maxBlockBytes || offset+length+block.TrailerLen > tableSize {
		return nil, fmt.Errorf("kv: block %d/%d past a %d-byte table", offset, length, tableSize)
	}
	levels, err := sm.db.SSTables()
	if err != nil {
		return nil, Classify(err)
	}
	seen := map[string]bool{}
	var out [][]byte
	for _, level := range levels {
		for _, t := range level {
			path := sm.fs.PathJoin(sm.dir, fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum)))
			if seen[path] {
				continue
			}
			seen[path] = true
			st, err := sm.fs.Stat(path)
			if err != nil || uint64(st.Size()) != tableSize {
				continue
			}
			b, err := ReadBlock(sm.fs, path, block.Handle{Offset: offset, Length: length})
			if err != nil {
				continue
			}
			out = append(out, b)
		}
	}
	return out, nil
}
