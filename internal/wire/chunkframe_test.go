package wire

import (
	"math/rand"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

func randomChunksResponse(rng *rand.Rand) *nodepb.ReadChunksResponse {
	m := &nodepb.ReadChunksResponse{Index: rng.Uint32() >> uint(rng.Intn(32))}
	switch rng.Intn(4) {
	case 0:
		m.Missing = true
	case 1:
		m.Error = []string{"", "read failed: EIO", "é ✓"}[rng.Intn(3)]
	default:
		c := &nodepb.ReadChunkResponse{SumsValid: rng.Intn(2) == 0, Corrupt: rng.Intn(3) == 0, Transient: rng.Intn(4) == 0}
		c.Data = make([]byte, []int{0, 1, 511, 512, 65536}[rng.Intn(5)])
		rng.Read(c.Data)
		for i := rng.Intn(129); i > 0; i-- {
			c.Sums = append(c.Sums, rng.Uint32())
		}
		m.Chunk = c
	}
	return m
}

// The hand coding of ReadChunksResponse agrees with protobuf's both ways,
// for seeded random messages: a frame decodes with proto.Unmarshal to the
// message sent, and protobuf's encoding decodes with unmarshalChunks to the
// message encoded.
func TestChunkFrameMatchesProto(t *testing.T) {
	const seed = 14
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 500; i++ {
		want := randomChunksResponse(rng)
		f := &ChunkFrame{Resp: proto.Clone(want).(*nodepb.ReadChunksResponse)}
		if want.Chunk != nil && len(want.Chunk.Data) > 0 && rng.Intn(2) == 0 {
			// The data in a pooled buffer, as the node sends it.
			f.Buf = ChunkBufferPool.Get(len(want.Chunk.Data))
			copy(*f.Buf, want.Chunk.Data)
			f.Resp.Chunk.Data = *f.Buf
		}
		if c := want.Chunk; c != nil && chunkHeaderSize(c) != len(appendChunkHeader(nil, c)) {
			t.Fatalf("message %d: chunkHeaderSize %d, appendChunkHeader wrote %d bytes", i, chunkHeaderSize(c), len(appendChunkHeader(nil, c)))
		}
		bs, err := ChunkCodec{}.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		wireBytes := bs.Materialize()
		bs.Free()
		got := &nodepb.ReadChunksResponse{}
		if err := proto.Unmarshal(wireBytes, got); err != nil {
			t.Fatalf("message %d: proto.Unmarshal of a frame: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("message %d: sent %v, protobuf decodes %v", i, want, got)
		}
		enc, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got2 := &nodepb.ReadChunksResponse{}
		if err := unmarshalChunks(enc, got2); err != nil {
			t.Fatalf("message %d: unmarshalChunks of protobuf's encoding: %v", i, err)
		}
		if !proto.Equal(got2, want) {
			t.Fatalf("message %d: protobuf encoded %v, unmarshalChunks decodes %v", i, want, got2)
		}
		// What the client's codec receives: the frame, cut in 16 KiB
		// pieces; a large chunk lands at the start of a pooled buffer.
		got3 := &nodepb.ReadChunksResponse{}
		if err := (ChunkCodec{}).Unmarshal(splitFrames(wireBytes), got3); err != nil {
			t.Fatalf("message %d: ChunkCodec.Unmarshal of a frame: %v", i, err)
		}
		if !proto.Equal(got3, want) {
			t.Fatalf("message %d: sent %v, ChunkCodec decodes %v", i, want, got3)
		}
		if len(wireBytes) >= pooledChunkMin && cap(got3.Chunk.Data) != 128<<10 {
			t.Fatalf("message %d: a chunk of %d bytes received outside the pool (capacity %d)", i, len(want.Chunk.Data), cap(got3.Chunk.Data))
		}
		if got3.Chunk != nil {
			RecycleChunkData(got3.Chunk.Data)
		}
	}
}

// The hand coding knows every field of the two messages: a field added to
// node.proto fails here until chunkframe.go codes it.
func TestChunkFrameKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		msg  proto.Message
		want []protoreflect.FieldNumber
	}{
		{&nodepb.ReadChunksResponse{}, []protoreflect.FieldNumber{fieldChunksIndex, fieldChunksChunk, fieldChunksMissing, fieldChunksError}},
		{&nodepb.ReadChunkResponse{}, []protoreflect.FieldNumber{fieldChunkData, fieldChunkSums, fieldChunkSumsValid, fieldChunkCorrupt, fieldChunkTransient}},
	} {
		fields := tc.msg.ProtoReflect().Descriptor().Fields()
		var got []protoreflect.FieldNumber
		for i := 0; i < fields.Len(); i++ {
			got = append(got, fields.Get(i).Number())
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Fatalf("%s has fields %v, the hand coding knows %v", tc.msg.ProtoReflect().Descriptor().FullName(), got, tc.want)
		}
	}
}

// clearUnknown drops the unknown fields protobuf keeps and unmarshalChunks
// skips.
func clearUnknown(m *nodepb.ReadChunksResponse) {
	m.ProtoReflect().SetUnknown(nil)
	if m.Chunk != nil {
		m.Chunk.ProtoReflect().SetUnknown(nil)
	}
}

// FuzzUnmarshalChunks: on any input unmarshalChunks and proto.Unmarshal
// agree: both fail, or both decode the same message (unknown fields aside).
func FuzzUnmarshalChunks(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 8; i++ {
		b, _ := proto.Marshal(randomChunksResponse(rng))
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x03, 0x0a, 0x01})             // a chunk whose data runs past its end
	f.Add([]byte{0x12, 0x02, 0x15, 0x01})             // a fixed32 sum cut short
	f.Add([]byte{0x22, 0x01, 0xff})                   // an error that is not UTF-8
	f.Add([]byte{0x12, 0x02, 0x08, 0x01, 0x12, 0x00}) // a chunk twice (merged)
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &nodepb.ReadChunksResponse{}
		werr := proto.Unmarshal(b, want)
		got := &nodepb.ReadChunksResponse{}
		gerr := unmarshalChunks(b, got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%x: proto.Unmarshal says %v, unmarshalChunks %v", b, werr, gerr)
		}
		if werr != nil {
			return
		}
		clearUnknown(want)
		if !proto.Equal(got, want) {
			t.Fatalf("%x: protobuf decodes %v, unmarshalChunks %v", b, want, got)
		}
		// The pooled receive path, taken for any size.
		got2 := &nodepb.ReadChunksResponse{}
		if err := unmarshalChunksAbove(splitFrames(b), got2, 0); err != nil {
			t.Fatalf("%x: unmarshalChunks decodes, unmarshalChunksAbove says %v", b, err)
		}
		if !proto.Equal(got2, want) {
			t.Fatalf("%x: protobuf decodes %v, unmarshalChunksAbove %v", b, want, got2)
		}
	})
}
