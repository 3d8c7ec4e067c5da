package raftlog

import (
	"bytes"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
)

// Fuzz targets for the raft log's decoders: one record (decodeRecord) and a
// generation's fragment stream read from its copies (parseCopies). Seed
// corpora are in testdata/fuzz/; `go test` runs them, `flashmend torture
// fuzz` (or go test -fuzz=FuzzX) explores further.

// FuzzDecodeRecord: any bytes decode to a record or a corruption error, and
// a record that decodes re-encodes to bytes that decode to the same record.
func FuzzDecodeRecord(f *testing.F) {
	e, _ := encodeMsg(recEntry, &pb.Entry{Term: proto.Uint64(3), Index: proto.Uint64(7), Data: []byte("put k v")})
	hs, _ := encodeMsg(recHardState, &pb.HardState{Term: proto.Uint64(3), Vote: proto.Uint64(2), Commit: proto.Uint64(6)})
	sn, _ := encodeMsg(recSnapshot, &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(5), Term: proto.Uint64(2)}})
	f.Add(e)
	f.Add(hs)
	f.Add(sn)
	f.Add(encodeIDRecord(recCompact, entryID{index: 9, term: 4}))
	f.Add(encodeIDRecord(recFloor, entryID{index: 1 << 40, term: 1 << 33}))
	f.Add([]byte{recBase, 0x80})
	f.Add([]byte{99})
	f.Fuzz(func(t *testing.T, rec []byte) {
		d, err := decodeRecord(rec)
		if err != nil {
			if !base.IsCorruption(err) {
				t.Fatalf("error is not a corruption: %v", err)
			}
			return
		}
		again, err := d.encode()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		d2, err := decodeRecord(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if d2.kind != d.kind || d2.id != d.id || !proto.Equal(d2.entry, d.entry) || !proto.Equal(d2.hs, d.hs) || !proto.Equal(d2.snap, d.snap) {
			t.Fatalf("record changed through encode: %+v -> %+v", d, d2)
		}
	})
}

// FuzzParseCopies frames records (the blob cut at 0xff bytes, each
// repeated scale times so records span blocks) into two copies of a
// generation, damages them, and parses them back:
//   - damage in one copy only: every record comes back, none lost, nothing
//     torn (the other copy holds every fragment);
//   - damage in both: every record that comes back is the one written at
//     that offset (a loss is reported, never a record stitched from the
//     fragments of two records or made of damaged bytes), and replaying
//     the items does not panic.
func FuzzParseCopies(f *testing.F) {
	f.Add([]byte("a\xffbb\xffccc"), uint8(1), uint16(0), uint64(1), []byte{}, []byte{})
	f.Add([]byte("entry one\xffentry two\xffthird"), uint8(60), uint16(0), uint64(7), []byte{10, 0, 0xff}, []byte{})
	f.Add([]byte("x\xffyy\xffzzz\xffwwww"), uint8(200), uint16(300), uint64(2), []byte{0, 2, 1, 2, 3}, []byte{0, 2, 1})
	f.Add([]byte("r1\xffr2\xffr3\xffr4"), uint8(255), uint16(1), uint64(3), []byte{0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{0, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, blob []byte, scale uint8, block uint16, gen uint64, m0, m1 []byte) {
		blockBytes := 512 + int64(block)%3584
		// Bound the work per input: a generation of at most ~64 KiB.
		blob = blob[:min(len(blob), 4096)]
		reps := min(int(scale)%64+1, 64<<10/max(1, len(blob)))
		var recs [][]byte
		for _, r := range bytes.Split(blob, []byte{0xff}) {
			if len(r) > 0 {
				recs = append(recs, bytes.Repeat(r, max(1, reps)))
			}
		}
		if len(recs) == 0 {
			return
		}
		w := framer{gen: gen, blockBytes: blockBytes}
		var stream []byte
		at := map[int64][]byte{}
		for _, r := range recs {
			start := w.off
			if blockBytes-start%blockBytes < fragHeaderBytes+1 {
				start = (start/blockBytes + 1) * blockBytes
			}
			at[start] = r
			stream = w.appendRecord(stream, r)
		}
		intact := parseCopies(gen, [][]byte{stream, stream}, blockBytes)
		checkAll(t, "intact", intact, recs, int64(len(stream)))
		if intact.fragsRepaired != 0 {
			t.Fatalf("intact copies: %d fragments repaired", intact.fragsRepaired)
		}
		c0 := append([]byte(nil), stream...)
		c1 := append([]byte(nil), stream...)
		d0 := bitrot.XORAt(c0, m0)
		checkAll(t, "copy 0 damaged", parseCopies(gen, [][]byte{c0, stream}, blockBytes), recs, int64(len(stream)))
		checkAll(t, "copy 1 damaged", parseCopies(gen, [][]byte{stream, c0}, blockBytes), recs, int64(len(stream)))
		d1 := bitrot.XORAt(c1, m1)
		res := parseCopies(gen, [][]byte{c0, c1}, blockBytes)
		lost := false
		for _, it := range res.items {
			if it.loss {
				lost = true
				continue
			}
			want, ok := at[it.off]
			if !ok || !bytes.Equal(it.rec, want) {
				t.Fatalf("both copies damaged: record at %d (%d bytes) is not the one written there (%d bytes)", it.off, len(it.rec), len(want))
			}
		}
		if !d0 && !d1 && lost {
			t.Fatalf("undamaged copies reported a loss")
		}
		// Items of arbitrary bytes replay without a panic.
		_, _ = replay(res.items)
	})
}

// checkAll asserts that res holds exactly recs, whole, and no loss.
func checkAll(t *testing.T, what string, res parseResult, recs [][]byte, size int64) {
	t.Helper()
	if len(res.items) != len(recs) {
		t.Fatalf("%s: %d items, wrote %d records", what, len(res.items), len(recs))
	}
	for i, it := range res.items {
		if it.loss || !bytes.Equal(it.rec, recs[i]) {
			t.Fatalf("%s: item %d (loss %v, %d bytes) is not record %d (%d bytes)", what, i, it.loss, len(it.rec), i, len(recs[i]))
		}
	}
	if res.tornBytes != 0 || res.end != size {
		t.Fatalf("%s: end %d torn %d, want end %d", what, res.end, res.tornBytes, size)
	}
}
