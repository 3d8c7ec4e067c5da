package objstore

import (
	"bytes"
	"math/rand"
	"slices"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
)

func spanTestChunk(t *testing.T, seed int64, n int) (*ChunkStore, direct.ChunkID, []byte) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	c := NewChunkStore(NewMemStore())
	id := direct.ChunkID{Object: 0xabc, Version: 3, Shard: 1, Index: 5}
	data := make([]byte, n)
	rng.Read(data)
	if err := c.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
		t.Fatal(err)
	}
	return c, id, data
}

// TestReadChunkSpan: a span read returns the span and the sums of its
// sectors, judged on the span alone.
func TestReadChunkSpan(t *testing.T) {
	c, id, data := spanTestChunk(t, 1, direct.ChunkSize-100)
	span := direct.Span{Off: 4096, Len: 4096}
	r, err := c.ReadChunkSpan(id, span, false)
	if err != nil || r.Corrupt || !bytes.Equal(r.Data, data[4096:8192]) || !slices.Equal(r.Sums, direct.Sums(id, data)[8:16]) {
		t.Fatalf("clean span: %v %v", r, err)
	}
	// The last span is clipped to the chunk's end; all sums on request.
	r, err = c.ReadChunkSpan(id, direct.Span{Off: direct.ChunkSize - 512, Len: 512}, true)
	if err != nil || r.Corrupt || !bytes.Equal(r.Data, data[direct.ChunkSize-512:]) || len(r.Sums) != direct.SectorsPerChunk {
		t.Fatalf("last span: %v %v", r, err)
	}
	// Damage outside the span does not show; inside it does.
	if err := c.Corrupt(id, 100, 3); err != nil {
		t.Fatal(err)
	}
	if r, err = c.ReadChunkSpan(id, span, false); err != nil || r.Corrupt {
		t.Fatalf("damage outside the span: %v %v", r, err)
	}
	if err := c.Corrupt(id, 5000, 3); err != nil {
		t.Fatal(err)
	}
	if r, err = c.ReadChunkSpan(id, span, false); err != nil || !r.Corrupt {
		t.Fatalf("damage inside the span: %v %v", r, err)
	}
	for _, bad := range []direct.Span{{Off: 3, Len: 512}, {Off: 0, Len: 0}, {Off: direct.ChunkSize, Len: 1}} {
		if _, err := c.ReadChunkSpan(id, bad, false); !base.IsInvalidArgument(err) {
			t.Fatalf("span %v: %v", bad, err)
		}
	}
	if _, err := c.ReadChunkSpan(direct.ChunkID{Object: 1, Version: 1}, span, false); !IsNotFound(err) {
		t.Fatalf("missing chunk: %v", err)
	}
}

// TestPatchChunk: a patch over damaged sectors (a range that crosses a
// sector boundary takes both sectors) restores the chunk and rewrites only
// what changed; a patch that leaves a bad sector, or a lost sums record
// with no sums given, changes nothing.
func TestPatchChunk(t *testing.T) {
	c, id, data := spanTestChunk(t, 2, direct.ChunkSize)
	// Damage bytes 1000-1040: sectors 1 and 2.
	if err := c.Corrupt(id, 1000, 320); err != nil {
		t.Fatal(err)
	}
	cover, err := direct.Cover(len(data), []direct.Span{{Off: 1000, Len: 40}})
	if err != nil || len(cover) != 1 || cover[0] != (direct.Span{Off: 512, Len: 1024}) {
		t.Fatalf("cover %v %v", cover, err)
	}
	// A patch of only sector 1 leaves sector 2 bad: refused, nothing
	// written.
	written := c.Stats().ChunksWritten
	if _, err := c.PatchChunk(id, []Patch{{Off: 512, Data: data[512:1024]}}, nil); !base.IsCorruption(err) {
		t.Fatalf("partial patch: %v", err)
	}
	if c.Stats().ChunksWritten != written {
		t.Fatal("a refused patch wrote")
	}
	n, err := c.PatchChunk(id, []Patch{{Off: cover[0].Off, Data: data[cover[0].Off:cover[0].End()]}}, nil)
	if err != nil || n != 1024 {
		t.Fatalf("patch: %d bytes, %v", n, err)
	}
	r, err := c.ReadChunk(id)
	if err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
		t.Fatalf("after the patch: %v %v", r, err)
	}
	// Nothing wrong: nothing written.
	if n, err := c.PatchChunk(id, []Patch{{Off: 0, Data: data[:512]}}, nil); err != nil || n != 0 {
		t.Fatalf("clean patch: %d %v", n, err)
	}
	// The sums record lost with a sector: the sums must come with the
	// patch (another replica's), and the record is written again.
	if err := c.Store().Delete(SumsName(id)); err != nil {
		t.Fatal(err)
	}
	if err := c.Corrupt(id, 9000, 8); err != nil {
		t.Fatal(err)
	}
	p := []Patch{{Off: 8704, Data: data[8704:9216]}}
	if _, err := c.PatchChunk(id, p, nil); !base.IsCorruption(err) {
		t.Fatalf("no sums: %v", err)
	}
	wrong := direct.Sums(id, data)
	wrong[3]++
	if _, err := c.PatchChunk(id, p, wrong); !base.IsCorruption(err) {
		t.Fatalf("wrong sums: %v", err)
	}
	if n, err := c.PatchChunk(id, p, direct.Sums(id, data)); err != nil || n != 512 {
		t.Fatalf("patch with sums: %d %v", n, err)
	}
	if r, err := c.ReadChunk(id); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
		t.Fatalf("after the sums patch: %v %v", r, err)
	}
	// A valid record wins; sums that differ from it are refused.
	if _, err := c.PatchChunk(id, p, wrong); !base.IsInvalidArgument(err) {
		t.Fatalf("sums differing from the record: %v", err)
	}
	for _, bad := range [][]Patch{nil, {{Off: 1, Data: data[:512]}}, {{Off: 0, Data: data[:1024]}, {Off: 512, Data: data[:512]}}} {
		if _, err := c.PatchChunk(id, bad, nil); !base.IsInvalidArgument(err) {
			t.Fatalf("patches %v: %v", len(bad), err)
		}
	}
	if _, err := c.PatchChunk(direct.ChunkID{Object: 1, Version: 1}, p, direct.Sums(id, data)); !IsNotFound(err) {
		t.Fatalf("missing chunk: %v", err)
	}
}
