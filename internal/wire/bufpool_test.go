package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// TestChunkCodecRoundTrip marshals chunk messages of sizes around the pool's
// classes through buffers the pool hands out dirty (filled with 0xff by an
// earlier user), and checks that what is unmarshalled is what was sent.
func TestChunkCodecRoundTrip(t *testing.T) {
	for _, size := range []int{0, 100, 4 << 10, 64 << 10, 128<<10 - 100, 128 << 10, 2 << 20} {
		// Dirty every class first.
		for _, n := range []int{4 << 10, 16 << 10, 32 << 10, 128 << 10, 1 << 20} {
			b := ChunkBufferPool.Get(n)
			for i := range *b {
				(*b)[i] = 0xff
			}
			ChunkBufferPool.Put(b)
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 31)
		}
		in := &nodepb.WriteChunkRequest{Chunk: &nodepb.ChunkRef{Object: 7, Version: 9, Index: 3}, Data: data, Sums: []uint32{1, 2, 3}}
		bs, err := ChunkCodec{}.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("size %d: encoding differs from proto.Marshal's", size)
		}
		out := &nodepb.WriteChunkRequest{}
		if err := (ChunkCodec{}).Unmarshal(bs, out); err != nil {
			t.Fatal(err)
		}
		bs.Free()
		if !proto.Equal(in, out) {
			t.Fatalf("size %d: round trip changed the message", size)
		}
	}
	if _, err := (ChunkCodec{}).Marshal("not a message"); err == nil {
		t.Fatal("a string marshalled")
	}
}

func TestChunkBufferPoolClasses(t *testing.T) {
	for _, tc := range []struct{ n, cap int }{{1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 16 << 10}, {65 << 10, 128 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1}} {
		b := ChunkBufferPool.Get(tc.n)
		if len(*b) != tc.n || cap(*b) != tc.cap {
			t.Fatalf("Get(%d): len %d cap %d, want cap %d", tc.n, len(*b), cap(*b), tc.cap)
		}
		ChunkBufferPool.Put(b)
	}
}
