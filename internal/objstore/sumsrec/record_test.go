package sumsrec

import (
	"bytes"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/direct"
)

func TestSumsRecord(t *testing.T) {
	id := direct.ChunkID{Object: 9, Version: 1, Index: 2}
	data := make([]byte, 1000)
	rec := Encode(id, len(data), direct.Sums(id, data))
	n, sums, err := Decode(id, rec)
	if err != nil || n != 1000 || len(sums) != 2 {
		t.Fatalf("decode: %d %v %v", n, sums, err)
	}
	if _, _, err := Decode(direct.ChunkID{Object: 9, Version: 1, Index: 3}, rec); !base.IsCorruption(err) {
		t.Fatalf("record of another chunk accepted: %v", err)
	}
	for bit := 0; bit < len(rec)*8; bit++ {
		bad := append([]byte(nil), rec...)
		bad[bit/8] ^= 1 << (bit % 8)
		if _, _, err := Decode(id, bad); !base.IsCorruption(err) {
			t.Fatalf("flip of bit %d accepted", bit)
		}
	}
	if len(rec) != Size {
		t.Fatalf("record of %d bytes", len(rec))
	}
	if _, _, err := Decode(id, make([]byte, Size)); !base.IsCorruption(err) {
		t.Fatalf("empty slot accepted: %v", err)
	}
	for cut := 0; cut < len(rec); cut++ {
		if _, _, err := Decode(id, rec[:cut]); !base.IsCorruption(err) {
			t.Fatalf("truncation to %d accepted", cut)
		}
	}
}

// FuzzDecodeSums' seed corpus is in testdata/fuzz/; `go test` runs it,
// `flashmend torture fuzz` (or go test -fuzz=FuzzDecodeSums) explores
// further.

// FuzzDecodeSums: any record Decode accepts is the canonical encoding of
// what it returned (so no two byte strings decode to the same sums), a
// record round-trips, and a damaged record is a corruption error, never
// other sums.
func FuzzDecodeSums(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint32(0), uint32(3), uint32(1000), []byte{0, 0, 1})
	f.Add(uint64(0), uint64(0), uint32(5), uint32(6), uint32(direct.ChunkSize), []byte{0xff, 0x01, 0x80, 0, 7})
	f.Add(uint64(9), uint64(1), uint32(1), uint32(0), uint32(1), []byte{})
	f.Fuzz(func(t *testing.T, object, version uint64, shard, index, dataLen uint32, mask []byte) {
		id := direct.ChunkID{Object: object, Version: version, Shard: shard, Index: index}
		// Raw bytes: the mask itself as a record (also padded to size).
		for _, raw := range [][]byte{mask, append(append([]byte(nil), mask...), make([]byte, max(0, Size-len(mask)))...)} {
			n, sums, err := Decode(id, raw)
			if err != nil {
				if !base.IsCorruption(err) {
					t.Fatalf("Decode error is not a corruption: %v", err)
				}
				continue
			}
			if again := Encode(id, n, sums); !bytes.Equal(again, raw) {
				t.Fatalf("accepted a record that is not the encoding of what it decoded to (%d bytes, %d sums)", n, len(sums))
			}
		}
		n := int(dataLen%direct.ChunkSize) + 1
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*7) ^ byte(object)
		}
		want := direct.Sums(id, data)
		rec := Encode(id, n, want)
		gotN, got, err := Decode(id, rec)
		if err != nil || gotN != n || len(got) != len(want) {
			t.Fatalf("round trip: %d %d sums %v (want %d, %d sums)", gotN, len(got), err, n, len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("round trip: sum %d is %08x, want %08x", i, got[i], want[i])
			}
		}
		if bitrot.XORAt(rec, mask) {
			if _, _, err := Decode(id, rec); !base.IsCorruption(err) {
				t.Fatalf("damaged record (mask %x) decoded: err %v", mask, err)
			}
			// What is left of the sectors' sums is only ever used per
			// sector, and then only if it matches the sector's data.
			if d := Damaged(rec); d != nil && len(d) != direct.SectorsPerChunk {
				t.Fatalf("Damaged returned %d sums", len(d))
			}
		}
	})
}
