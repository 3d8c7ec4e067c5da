package direct

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

func TestCover(t *testing.T) {
	for _, tc := range []struct {
		chunkLen int
		lost     []Span
		want     string
	}{
		{ChunkSize, []Span{{4096, 4096}}, "[[4096,8192)]"},
		// A lost range that crosses a sector boundary takes both sectors.
		{ChunkSize, []Span{{700, 600}}, "[[512,1536)]"},
		{ChunkSize, []Span{{511, 2}}, "[[0,1024)]"},
		// Touching and overlapping ranges merge; order does not matter.
		{ChunkSize, []Span{{8192, 100}, {0, 512}, {512, 1}, {8000, 10}}, "[[0,1024) [7680,8704)]"},
		// The last sector of a short chunk is short.
		{1000, []Span{{900, 4096}}, "[[512,1000)]"},
		{1000, []Span{{1000, 10}, {5, 0}}, "[]"},
	} {
		got, err := Cover(tc.chunkLen, tc.lost)
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(got); s != tc.want && !(tc.want == "[]" && len(got) == 0) {
			t.Errorf("Cover(%d, %v) = %s, want %s", tc.chunkLen, tc.lost, s, tc.want)
		}
	}
	for _, bad := range []struct {
		n    int
		lost []Span
	}{{0, nil}, {ChunkSize + 1, nil}, {100, []Span{{-1, 5}}}, {100, []Span{{0, -5}}}} {
		if _, err := Cover(bad.n, bad.lost); !base.IsInvalidArgument(err) {
			t.Errorf("Cover(%d, %v): %v, want an invalid-argument error", bad.n, bad.lost, err)
		}
	}
	for _, s := range []Span{{1, 10}, {0, 0}, {ChunkSize, 512}, {512, ChunkSize}} {
		if err := CheckSpan(s); !base.IsInvalidArgument(err) {
			t.Errorf("CheckSpan(%v) = %v", s, err)
		}
	}
	if err := CheckSpan(Span{ChunkSize - 512, 512}); err != nil {
		t.Error(err)
	}
}

// TestSumsFromMatchesSums: the sums of a sector range computed alone are
// the whole chunk's sums of those sectors, and nothing else verifies.
func TestSumsFromMatchesSums(t *testing.T) {
	seed := int64(11)
	rng := rand.New(rand.NewSource(seed))
	id := ChunkID{Object: 9, Version: 3, Shard: 2, Index: 7}
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(ChunkSize)
		data := make([]byte, n)
		rng.Read(data)
		all := Sums(id, data)
		first := rng.Intn(SectorCount(n))
		last := first + rng.Intn(SectorCount(n)-first)
		part := data[first*SectorSize : min((last+1)*SectorSize, n)]
		if got := SumsFrom(id, first, part); !slices.Equal(got, all[first:last+1]) {
			t.Fatalf("seed %d trial %d: sums of sectors %d-%d differ", seed, trial, first, last)
		}
		if err := VerifyFrom(id, first, part, all[first:last+1]); err != nil {
			t.Fatal(err)
		}
		if first > 0 && VerifyFrom(id, first-1, part, all[first:last+1]) == nil {
			t.Fatalf("seed %d: a range verifies at the wrong sector", seed)
		}
	}
}

// spanReads returns the span of each copy as a node would: data and the
// sums of its sectors.
func spanRead(id ChunkID, chunk []byte, sums []uint32, span Span) ReplicaRead {
	first := span.FirstSector()
	return ReplicaRead{Fetched: true, Data: append([]byte(nil), chunk[span.Off:span.End()]...),
		Sums: append([]uint32(nil), sums[first:first+SectorCount(span.Len)]...)}
}

func flip(b []byte, bit int) { b[bit/8] ^= 1 << (bit % 8) }

func TestDecideSpanREP(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	id := ChunkID{Object: 1, Version: 1, Index: 3}
	chunk := make([]byte, ChunkSize)
	rng.Read(chunk)
	sums := Sums(id, chunk)
	span := Span{Off: 4096, Len: 4096}
	want := chunk[span.Off:span.End()]

	// Both other replicas good: the first wins, nothing to repair.
	reads := []ReplicaRead{spanRead(id, chunk, sums, span), spanRead(id, chunk, sums, span)}
	if d := DecideSpanREP(id, span, reads); d.Err != nil || !bytes.Equal(d.Data, want) || len(d.Repairs) != 0 {
		t.Fatalf("clean: %v", d)
	}
	// The first replica's span is corrupt: the second's serves, the first
	// is repaired with it.
	flip(reads[0].Data, 100)
	if d := DecideSpanREP(id, span, reads); d.Err != nil || !bytes.Equal(d.Data, want) || !slices.Equal(d.Repairs, []int{0}) {
		t.Fatalf("one corrupt: %v", d)
	}
	// Both corrupt in different sectors: merged sector by sector.
	flip(reads[1].Data, 8*1024+3)
	if d := DecideSpanREP(id, span, reads); d.Err != nil || !bytes.Equal(d.Data, want) || len(d.Repairs) != 2 {
		t.Fatalf("corrupt in different sectors: %v", d)
	}
	// Both corrupt in the same sector: two copies cannot vote.
	flip(reads[1].Data, 101)
	if d := DecideSpanREP(id, span, reads); !base.IsDataLoss(d.Err) {
		t.Fatalf("corrupt in the same sector: %v", d)
	}
	// Unread replicas are asked for one at a time.
	if d := DecideSpanREP(id, span, make([]ReplicaRead, 2)); !slices.Equal(d.Fetch, []int{0}) {
		t.Fatalf("nothing read: %v", d)
	}
	if d := DecideSpanREP(id, Span{Off: 3, Len: 512}, reads); !base.IsInvalidArgument(d.Err) {
		t.Fatalf("unaligned span: %v", d)
	}
}

// TestDecideSpanEC decodes a lost span of each shard of a random row from
// the same span of the others, with some of them corrupt, running the
// decision's fetches as the I/O loop does; it checks the rebuilt span
// against the original byte for byte, and that the shards it read are the
// span only.
func TestDecideSpanEC(t *testing.T) {
	seed := int64(17)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	enc := NewEncoder()
	for trial := 0; trial < 60; trial++ {
		rowLen := 1 + rng.Intn(ChunkSize)
		shards := encodedRow(t, enc, rng, rowLen)
		var ids [TotalShards]ChunkID
		var sums [TotalShards][]uint32
		for s := range ids {
			ids[s] = ChunkID{Object: 4, Version: 2, Shard: uint32(s), Index: uint32(trial)}
			sums[s] = Sums(ids[s], shards[s])
		}
		target := rng.Intn(TotalShards)
		off := rng.Intn(rowLen)
		cover, err := Cover(rowLen, []Span{{off, 1 + rng.Intn(rowLen-off)}})
		if err != nil || len(cover) != 1 {
			t.Fatalf("cover: %v %v", cover, err)
		}
		span := cover[0]
		// corrupt: how many other shards have a flip in the span; same:
		// whether the flips share a sector (then three are too many).
		corrupt := rng.Intn(3)
		sameSector := rng.Intn(2) == 0 && span.Len > SectorSize
		bad := map[int]int{} // shard -> bit flipped within the span
		others := rng.Perm(TotalShards)
		for _, s := range others {
			if s == target || len(bad) == corrupt {
				continue
			}
			bit := rng.Intn(span.Len * 8)
			if sameSector {
				bit = rng.Intn(8 * min(SectorSize, span.Len))
			}
			bad[s] = bit
		}
		var reads [TotalShards]ReplicaRead
		fetched := 0
		var d Decision
		for round := 0; ; round++ {
			d = DecideSpanEC(enc, ids, target, span, reads)
			if len(d.Fetch) == 0 {
				break
			}
			if round > TotalShards {
				t.Fatalf("trial %d: the decision keeps fetching: %v", trial, d)
			}
			for _, s := range d.Fetch {
				if s == target {
					t.Fatalf("trial %d: the decision fetches the lost shard %d", trial, s)
				}
				reads[s] = spanRead(ids[s], shards[s], sums[s], span)
				if bit, ok := bad[s]; ok {
					flip(reads[s].Data, bit)
				}
				fetched++
			}
		}
		name := fmt.Sprintf("seed %d trial %d (rowLen %d, span %v, target %d, corrupt %v, same sector %v)", seed, trial, rowLen, span, target, bad, sameSector)
		if d.Err != nil {
			// Two other shards corrupt in one sector leave three good of
			// the five: not enough to decode that sector.
			sectors := map[int]bool{}
			for _, bit := range bad {
				sectors[bit/8/SectorSize] = true
			}
			if len(bad) == 2 && len(sectors) == 1 && base.IsDataLoss(d.Err) {
				continue
			}
			t.Fatalf("%s: %v", name, d.Err)
		}
		k := slices.Index(d.Repairs, target)
		if k < 0 || !bytes.Equal(d.RepairData[k], shards[target][span.Off:span.End()]) {
			t.Fatalf("%s: target not rebuilt: %v", name, d)
		}
		if fetched > DataShards+corrupt {
			t.Fatalf("%s: fetched %d spans for %d corrupt", name, fetched, corrupt)
		}
		for s := range bad {
			if reads[s].Fetched && !slices.Contains(d.Repairs, s) {
				t.Fatalf("%s: corrupt shard %d read but not repaired: %v", name, s, d.Repairs)
			}
		}
	}
}
