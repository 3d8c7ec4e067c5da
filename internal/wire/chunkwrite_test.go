package wire

import (
	"math/rand"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

func randomWriteRequest(rng *rand.Rand) *nodepb.WriteChunkRequest {
	m := &nodepb.WriteChunkRequest{
		Chunk:  &nodepb.ChunkRef{Object: rng.Uint64(), Version: rng.Uint64() >> uint(rng.Intn(64)), Shard: uint32(rng.Intn(6)), Index: rng.Uint32() >> uint(rng.Intn(32))},
		Repair: rng.Intn(3) == 0, Missing: rng.Intn(5) == 0,
	}
	m.Data = make([]byte, []int{0, 1, 511, 512, 65536}[rng.Intn(5)])
	rng.Read(m.Data)
	for i := rng.Intn(129); i > 0; i-- {
		m.Sums = append(m.Sums, rng.Uint32())
	}
	if rng.Intn(3) == 0 {
		m.Info = &nodepb.BlobInfo{Key: []string{"k", "é ✓/obj"}[rng.Intn(2)], Object: m.Chunk.Object, Version: m.Chunk.Version,
			Shard: m.Chunk.Shard, Redundancy: "REP", Chunks: rng.Uint32(), SizeBytes: rng.Int63(), Placement: []uint64{1, 2, 3}, CreatedUnixMs: rng.Int63()}
	}
	return m
}

// splitFrames cuts b into gRPC-like frames of at most 16 KiB, each its own
// buffer, as the transport hands a received message to the codec.
func splitFrames(b []byte) mem.BufferSlice {
	var bs mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		bs = append(bs, mem.SliceBuffer(append([]byte(nil), b[:n]...)))
		b = b[n:]
	}
	return bs
}

// within reports whether sub's first byte lies in buf's backing array.
func within(buf, sub []byte) bool {
	buf = buf[:cap(buf)]
	for k := range buf {
		if &buf[k] == &sub[0] {
			return true
		}
	}
	return false
}

// ChunkCodec decodes protobuf's encoding of seeded random WriteChunkRequests
// into a ChunkWrite exactly as proto.Unmarshal does, the data aliasing the
// pooled buffer it was gathered into, until Release.
func TestChunkWriteMatchesProto(t *testing.T) {
	const seed = 38
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 500; i++ {
		want := randomWriteRequest(rng)
		enc, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var w ChunkWrite
		if err := (ChunkCodec{}).Unmarshal(splitFrames(enc), &w); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(w.WriteChunkRequest, want) {
			t.Fatalf("message %d: protobuf encoded %v, ChunkCodec decodes %v", i, want, w.WriteChunkRequest)
		}
		if len(want.Data) > 0 && !within(*w.buf, w.Data) {
			t.Fatalf("message %d: the data does not alias the pooled buffer", i)
		}
		w.Release()
		w.Release() // idempotent
		if w.WriteChunkRequest != nil || w.buf != nil {
			t.Fatalf("message %d: Release left %v", i, w)
		}
	}
}

// FuzzUnmarshalChunkWrite: on any input unmarshalChunkWrite and
// proto.Unmarshal agree: both fail, or both decode the same message.
func FuzzUnmarshalChunkWrite(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 8; i++ {
		b, _ := proto.Marshal(randomWriteRequest(rng))
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x03, 0x01})             // data running past the end
	f.Add([]byte{0x12, 0x01, 0x07, 0x12, 0x00}) // data twice, the last empty
	f.Add([]byte{0x10, 0x05})                   // data with a varint's wire type
	f.Add([]byte{0x2a, 0x02, 0x0a, 0x80})       // blob info whose key is cut short
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &nodepb.WriteChunkRequest{}
		werr := proto.Unmarshal(b, want)
		var w ChunkWrite
		gerr := unmarshalChunkWrite(mem.BufferSlice{mem.SliceBuffer(b)}, &w)
		defer w.Release()
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%x: proto.Unmarshal says %v, unmarshalChunkWrite %v", b, werr, gerr)
		}
		if werr != nil {
			return
		}
		if !proto.Equal(w.WriteChunkRequest, want) {
			t.Fatalf("%x: protobuf decodes %v, unmarshalChunkWrite %v", b, want, w.WriteChunkRequest)
		}
	})
}
