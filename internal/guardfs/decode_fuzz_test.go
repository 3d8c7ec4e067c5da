package guardfs

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/guardfs/frames"
)

// Fuzz targets for guardfs's decoders: the frames of a protected file read
// back from its copies (parseFrames, merge) and a sealed sstable's sidecar
// (decodeSidecar). Seed corpora are in testdata/fuzz/; `go test` runs
// them, `flashmend torture fuzz` (or go test -fuzz=FuzzX) explores further.

func copyOf(buf []byte) frames.CopyState {
	return frames.CopyState{Present: true, Physical: int64(len(buf)), Frames: frames.Parse(buf)}
}

// FuzzMergeFrames frames a file's bytes into two copies, damages them and
// merges them back:
//   - every byte the merge says it holds is the byte written (damage is
//     lost bytes, never other bytes);
//   - damage in one copy only loses nothing, and the undamaged copy is
//     "perfect";
//   - arbitrary bytes parse and merge without a panic.
func FuzzMergeFrames(f *testing.F) {
	f.Add([]byte("hello, guardfs"), uint16(4), uint64(7), true, []byte{}, []byte{})
	f.Add(bytes.Repeat([]byte("0123456789"), 500), uint16(4096), uint64(1), true, []byte{3, 0, 0xff}, []byte{})
	f.Add(bytes.Repeat([]byte("abc"), 300), uint16(100), uint64(2), false, []byte{0, 1, 1, 2, 3}, []byte{40, 1, 1})
	f.Add(bytes.Repeat([]byte{0}, 2000), uint16(512), uint64(3), true, []byte{0, 0, 0xff, 0xff, 0xff, 0xff}, []byte{0, 2, 0xff})
	f.Fuzz(func(t *testing.T, data []byte, frameBytes uint16, id uint64, seal bool, m0, m1 []byte) {
		data = data[:min(len(data), 16<<10)]
		fb := int(frameBytes)%frames.MaxBytes + 1
		buf := frames.Append(nil, id, 0, data, fb)
		if seal {
			buf = frames.AppendSeal(buf, id, int64(len(data)))
		}
		// Arbitrary bytes: parse and merge must not panic, and every frame
		// returned verifies where it was found.
		for _, raw := range [][]byte{m0, m1} {
			for _, fr := range frames.Parse(raw) {
				if _, ok := frames.VerifyAt(raw, int(fr.Pos)); !ok {
					t.Fatalf("parseFrames returned a frame that does not verify: %s", fr)
				}
			}
			_ = frames.Merge(id, []frames.CopyState{copyOf(raw)})
		}
		intact := frames.Merge(id, []frames.CopyState{copyOf(buf), copyOf(buf)})
		checkMerged(t, "intact", intact, data, seal)
		if len(intact.Lost) != 0 || intact.Size != int64(len(data)) || !intact.Perfect[0] || !intact.Perfect[1] {
			t.Fatalf("intact copies: size %d lost %v perfect %v", intact.Size, intact.Lost, intact.Perfect)
		}
		c0 := append([]byte(nil), buf...)
		c1 := append([]byte(nil), buf...)
		d0 := bitrot.XORAt(c0, m0)
		one := frames.Merge(id, []frames.CopyState{copyOf(c0), copyOf(buf)})
		checkMerged(t, "copy 0 damaged", one, data, seal)
		if len(one.Lost) != 0 || one.Size != int64(len(data)) || !one.Perfect[1] || (d0 && one.Perfect[0]) {
			t.Fatalf("copy 0 damaged: size %d (want %d) lost %v perfect %v", one.Size, len(data), one.Lost, one.Perfect)
		}
		bitrot.XORAt(c1, m1)
		checkMerged(t, "both damaged", frames.Merge(id, []frames.CopyState{copyOf(c0), copyOf(c1)}), data, seal)
	})
}

// checkMerged asserts that every byte m holds is data's.
func checkMerged(t *testing.T, what string, m frames.Merged, data []byte, seal bool) {
	t.Helper()
	if m.Size > int64(len(data)) {
		t.Fatalf("%s: merged size %d beyond the %d bytes written", what, m.Size, len(data))
	}
	for _, r := range frames.Subtract(m.Size, m.Lost) {
		if !bytes.Equal(m.Data[r.Off:r.End()], data[r.Off:r.End()]) {
			t.Fatalf("%s: merged bytes %s differ from the bytes written", what, r)
		}
	}
	if m.Sealed && (!seal || m.Size != int64(len(data))) {
		t.Fatalf("%s: sealed at %d, wrote %d bytes (seal %v)", what, m.Size, len(data), seal)
	}
}

// FuzzDecodeSidecar: a sidecar round-trips, and any content (as if every
// frame verified) decodes to an error or to ranges that are sorted,
// disjoint, inside the sstable, and as long as their copied bytes.
func FuzzDecodeSidecar(f *testing.F) {
	f.Add(uint32(100000), []byte("footer bytes"), uint32(99988), []byte("index"), uint32(50000), uint16(512), []byte{})
	f.Add(uint32(10), []byte("x"), uint32(0), []byte("y"), uint32(5), uint16(4096), []byte{0, 0, 0x47, 0x46, 0x53, 0x43})
	f.Fuzz(func(t *testing.T, size uint32, a []byte, aOff uint32, b []byte, bOff uint32, frameBytes uint16, raw []byte) {
		// Arbitrary content.
		if sc, err := decodeSidecar(frames.Merged{Size: int64(len(raw)), Data: raw}); err == nil {
			checkSidecar(t, sc)
		} else if !base.IsCorruption(err) {
			t.Fatalf("error is not a corruption: %v", err)
		}
		// Round trip of two ranges in an sstable of size bytes.
		fb := int(frameBytes)%frames.MaxBytes + 1
		var ranges []rangeCopy
		next := int64(0)
		for _, r := range []struct {
			off  uint32
			data []byte
		}{{aOff, a}, {bOff, b}} {
			if len(r.data) == 0 || int64(r.off) < next || int64(r.off)+int64(len(r.data)) > int64(size) {
				continue
			}
			ranges = append(ranges, rangeCopy{Range: Range{Off: int64(r.off), Len: int64(len(r.data))}, data: r.data})
			next = int64(r.off) + int64(len(r.data))
		}
		content := encodeSidecar(int64(size), ranges, fb)
		sc, err := decodeSidecar(frames.Merged{Size: int64(len(content)), Data: content})
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		checkSidecar(t, sc)
		if sc.size != int64(size) || len(sc.ranges) != len(ranges) || len(sc.lost) != 0 {
			t.Fatalf("round trip: size %d, %d ranges, lost %v; wrote size %d, %d ranges", sc.size, len(sc.ranges), sc.lost, size, len(ranges))
		}
		for i, r := range sc.ranges {
			if r.Range != ranges[i].Range || !bytes.Equal(r.data, ranges[i].data) {
				t.Fatalf("round trip: range %d is %s, wrote %s", i, r.Range, ranges[i].Range)
			}
		}
	})
}

func checkSidecar(t *testing.T, sc *sidecarState) {
	t.Helper()
	prev := int64(0)
	for _, r := range sc.ranges {
		if r.Off < prev || r.Len <= 0 || r.End() > sc.size || r.End() < r.Off || int64(len(r.data)) != r.Len {
			t.Fatalf("sidecar of a %d-byte sstable accepted range %s (%d bytes of copy) after %d", sc.size, r.Range, len(r.data), prev)
		}
		prev = r.End()
	}
}

// TestSidecarRangeEndOverflowRejected: a sidecar table entry whose offset
// is near the top of int64 (so offset+length overflows) is a corruption,
// not a range "inside" the sstable. Found by FuzzDecodeSidecar's check
// (seed testdata/fuzz/FuzzDecodeSidecar/range-end-overflows).
func TestSidecarRangeEndOverflowRejected(t *testing.T) {
	content := encodeSidecar(1000, []rangeCopy{{Range: Range{Off: 100, Len: 4}, data: []byte("abcd")}}, 64)
	binary.LittleEndian.PutUint64(content[sidecarHeaderBytes:], 0x7fffffffffffff00)
	_, err := decodeSidecar(frames.Merged{Size: int64(len(content)), Data: content})
	if !base.IsCorruption(err) {
		t.Fatalf("range at offset %#x of a 1000-byte sstable: err %v, want a corruption", uint64(0x7fffffffffffff00), err)
	}
}
