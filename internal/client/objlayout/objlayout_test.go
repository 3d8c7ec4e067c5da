package objlayout

import (
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

func record(red objectpb.Redundancy, size int64) *objectpb.ObjectRecord {
	copies := 3
	if red == objectpb.Redundancy_EC {
		copies = direct.TotalShards
	}
	placement := make([]uint64, copies)
	for i := range placement {
		placement[i] = uint64(10 + i)
	}
	return &objectpb.ObjectRecord{Key: "k", Object: 0xabc, Version: 7, SizeBytes: size, Redundancy: red, Placement: placement}
}

func mustNew(t *testing.T, rec *objectpb.ObjectRecord) Layout {
	t.Helper()
	l, err := New(rec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The chunk counts and lengths at the boundaries of a chunk and a row.
func TestNewAndLengths(t *testing.T) {
	const c = direct.ChunkSize
	for _, tc := range []struct {
		red           objectpb.Redundancy
		size          int64
		chunks        int
		firstLen      int
		lastLen       int
		lastData      int
		replicaBytes  int64
		wantString    string
		wantUnitBytes int64
		wantCopies    int
	}{
		{objectpb.Redundancy_REP, 0, 0, 0, 0, 0, 0, "rep 0B in 0 chunks on [10 11 12]", c, 3},
		{objectpb.Redundancy_REP, 1, 1, 1, 1, 1, 1, "rep 1B in 1 chunks on [10 11 12]", c, 3},
		{objectpb.Redundancy_REP, c, 1, c, c, c, c, "rep 65536B in 1 chunks on [10 11 12]", c, 3},
		{objectpb.Redundancy_REP, c + 1, 2, c, 1, 1, c + 1, "rep 65537B in 2 chunks on [10 11 12]", c, 3},
		{objectpb.Redundancy_EC, 1, 1, 1, 1, 1, 1, "ec 1B in 1 chunks on [10 11 12 13 14 15]", RowBytes, 6},
		// 5 bytes in a row: shard chunks of 2 bytes (the last data shard
		// zero-padded).
		{objectpb.Redundancy_EC, 5, 1, 2, 2, 5, 2, "ec 5B in 1 chunks on [10 11 12 13 14 15]", RowBytes, 6},
		{objectpb.Redundancy_EC, RowBytes, 1, c, c, RowBytes, c, "ec 262144B in 1 chunks on [10 11 12 13 14 15]", RowBytes, 6},
		{objectpb.Redundancy_EC, RowBytes + 4, 2, c, 1, 4, c + 1, "ec 262148B in 2 chunks on [10 11 12 13 14 15]", RowBytes, 6},
	} {
		l := mustNew(t, record(tc.red, tc.size))
		if l.Chunks != tc.chunks || l.Copies != tc.wantCopies || l.EC != (tc.red == objectpb.Redundancy_EC) {
			t.Fatalf("%v %d: %d chunks of %d copies, want %d of %d", tc.red, tc.size, l.Chunks, l.Copies, tc.chunks, tc.wantCopies)
		}
		if got := l.String(); got != tc.wantString {
			t.Fatalf("String() = %q, want %q", got, tc.wantString)
		}
		if l.UnitBytes() != tc.wantUnitBytes {
			t.Fatalf("%v: unit %d bytes", tc.red, l.UnitBytes())
		}
		if got := l.ReplicaBytes(); got != tc.replicaBytes {
			t.Fatalf("%v %d: replica bytes %d, want %d", tc.red, tc.size, got, tc.replicaBytes)
		}
		if tc.chunks == 0 {
			continue
		}
		if got := l.ChunkLen(0); got != tc.firstLen {
			t.Fatalf("%v %d: first chunk %d bytes, want %d", tc.red, tc.size, got, tc.firstLen)
		}
		if got := l.ChunkLen(tc.chunks - 1); got != tc.lastLen {
			t.Fatalf("%v %d: last chunk %d bytes, want %d", tc.red, tc.size, got, tc.lastLen)
		}
		if got := l.DataLen(tc.chunks - 1); got != tc.lastData {
			t.Fatalf("%v %d: last unit carries %d bytes, want %d", tc.red, tc.size, got, tc.lastData)
		}
	}
}

// A record the layout cannot hold is corruption of the index, not a panic
// or a layout that reads the wrong bytes.
func TestNewRejectsBadRecords(t *testing.T) {
	bad := record(objectpb.Redundancy_REP, 10)
	bad.Placement = bad.Placement[:2]
	if _, err := New(bad); !base.IsCorruption(err) {
		t.Fatalf("REP with 2 placements: %v", err)
	}
	bad = record(objectpb.Redundancy_EC, 10)
	bad.Placement = append(bad.Placement, 99)
	if _, err := New(bad); !base.IsCorruption(err) {
		t.Fatalf("EC with 7 placements: %v", err)
	}
	bad = record(objectpb.Redundancy_REP, 10)
	bad.Redundancy = objectpb.Redundancy(42)
	if _, err := New(bad); !base.IsCorruption(err) {
		t.Fatalf("unknown redundancy: %v", err)
	}
}

// Against a brute-force model, for random sizes: the units carry the object
// exactly once, every unit but the last is full, an EC shard chunk is the
// row's bytes split four ways rounded up, and Locate finds the chunk and
// offset a walk over the chunk lengths finds. Seeded.
func TestLayoutAgainstBruteForce(t *testing.T) {
	const seed = 20261124
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for trial := 0; trial < 300; trial++ {
		red := objectpb.Redundancy_REP
		if trial%2 == 1 {
			red = objectpb.Redundancy_EC
		}
		size := rng.Int63n(3 << 20)
		if trial%5 == 0 {
			size = int64(rng.Intn(8)) * RowBytes // on a row boundary
		}
		l := mustNew(t, record(red, size))
		var carried, stored int64
		for i := 0; i < l.Chunks; i++ {
			data, chunk := l.DataLen(i), l.ChunkLen(i)
			if data <= 0 || chunk <= 0 || chunk > direct.ChunkSize {
				t.Fatalf("trial %d %s: unit %d carries %d bytes in chunks of %d", trial, l, i, data, chunk)
			}
			if i < l.Chunks-1 && (int64(data) != l.UnitBytes() || chunk != direct.ChunkSize) {
				t.Fatalf("trial %d %s: unit %d of %d is not full (%d bytes, chunk %d)", trial, l, i, l.Chunks, data, chunk)
			}
			if l.EC {
				if want := (data + direct.DataShards - 1) / direct.DataShards; chunk != want {
					t.Fatalf("trial %d %s: row %d of %d bytes has shard chunks of %d, want %d", trial, l, i, data, chunk, want)
				}
			} else if chunk != data {
				t.Fatalf("trial %d %s: REP chunk %d: %d bytes stored for %d carried", trial, l, i, chunk, data)
			}
			carried += int64(data)
			stored += int64(chunk)
		}
		if carried != size {
			t.Fatalf("trial %d %s: the units carry %d bytes of %d", trial, l, carried, size)
		}
		if got := l.ReplicaBytes(); got != stored {
			t.Fatalf("trial %d %s: ReplicaBytes %d, the chunks hold %d", trial, l, got, stored)
		}
		for k := 0; k < 5 && stored > 0; k++ {
			off := rng.Int63n(stored)
			chunk, within, err := l.Locate(off)
			if err != nil {
				t.Fatal(err)
			}
			wantChunk, at := 0, int64(0)
			for at+int64(l.ChunkLen(wantChunk)) <= off {
				at += int64(l.ChunkLen(wantChunk))
				wantChunk++
			}
			if chunk != wantChunk || within != off-at {
				t.Fatalf("trial %d %s: Locate(%d) = chunk %d +%d, want chunk %d +%d", trial, l, off, chunk, within, wantChunk, off-at)
			}
		}
		for _, off := range []int64{-1, stored} {
			if _, _, err := l.Locate(off); !base.IsInvalidArgument(err) {
				t.Fatalf("trial %d %s: Locate(%d) outside the %d stored bytes: %v", trial, l, off, stored, err)
			}
		}
	}
}

// A node's local index entry names the version as written, with a copy of
// the placement (a later change to the layout's does not reach it), and the
// record's creation time over the caller's when the record has one.
func TestBlobInfoAndID(t *testing.T) {
	rec := record(objectpb.Redundancy_EC, 3*RowBytes+17)
	l := mustNew(t, rec)
	info := l.BlobInfo(4, 1234)
	if info.Key != "k" || info.Object != 0xabc || info.Version != 7 || info.Shard != 4 || info.Redundancy != "ec" ||
		info.Chunks != 4 || info.SizeBytes != 3*RowBytes+17 || info.CreatedUnixMs != 1234 {
		t.Fatalf("blob info %v", info)
	}
	l.Placement[0] = 999
	if info.Placement[0] != 10 || len(info.Placement) != direct.TotalShards {
		t.Fatalf("the blob info shares the layout's placement: %v", info.Placement)
	}
	rec.CreatedUnixMs = 55
	if got := mustNew(t, rec).BlobInfo(0, 1234).CreatedUnixMs; got != 55 {
		t.Fatalf("created %d, want the record's 55", got)
	}
	if got := mustNew(t, record(objectpb.Redundancy_REP, 1)).BlobInfo(2, 0).Redundancy; got != "rep" {
		t.Fatalf("REP blob info redundancy %q", got)
	}
	id := l.ID(5, 3)
	if want := (direct.ChunkID{Object: 0xabc, Version: 7, Shard: 5, Index: 3}); id != want {
		t.Fatalf("ID(5, 3) = %v, want %v", id, want)
	}
}
