package objstore

import (
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
)

func TestSumsRecord(t *testing.T) {
	id := direct.ChunkID{Object: 9, Version: 1, Index: 2}
	data := make([]byte, 1000)
	rec := EncodeSums(id, len(data), direct.Sums(id, data))
	n, sums, err := DecodeSums(id, rec)
	if err != nil || n != 1000 || len(sums) != 2 {
		t.Fatalf("decode: %d %v %v", n, sums, err)
	}
	if _, _, err := DecodeSums(direct.ChunkID{Object: 9, Version: 1, Index: 3}, rec); !base.IsCorruption(err) {
		t.Fatalf("record of another chunk accepted: %v", err)
	}
	for bit := 0; bit < len(rec)*8; bit++ {
		bad := append([]byte(nil), rec...)
		bad[bit/8] ^= 1 << (bit % 8)
		if _, _, err := DecodeSums(id, bad); !base.IsCorruption(err) {
			t.Fatalf("flip of bit %d accepted", bit)
		}
	}
	if len(rec) != SumsRecordSize {
		t.Fatalf("record of %d bytes", len(rec))
	}
	if _, _, err := DecodeSums(id, make([]byte, SumsRecordSize)); !base.IsCorruption(err) {
		t.Fatalf("empty slot accepted: %v", err)
	}
	for cut := 0; cut < len(rec); cut++ {
		if _, _, err := DecodeSums(id, rec[:cut]); !base.IsCorruption(err) {
			t.Fatalf("truncation to %d accepted", cut)
		}
	}
}
