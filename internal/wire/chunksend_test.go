package wire

import (
	"bytes"
	"math/rand"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// ChunkCodec encodes a ChunkSend of seeded random WriteChunkRequests so
// that protobuf and ChunkWrite decode the request back; the data goes out
// as the caller's bytes, not a copy (but for data of at most gRPC's pooling
// threshold), and the release function runs exactly once, when the last
// reference to the encoded message is freed, never before.
func TestChunkSendMatchesProto(t *testing.T) {
	const seed = 46
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 500; i++ {
		want := randomWriteRequest(rng)
		data := want.Data
		req := proto.Clone(want).(*nodepb.WriteChunkRequest)
		req.Data = nil
		released := 0
		s := NewChunkSend(req, data, func() { released++ })
		enc, err := (ChunkCodec{}).Marshal(s)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		small := mem.IsBelowBufferPoolingThreshold(len(data))
		if small && released != 1 || !small && released != 0 {
			t.Fatalf("message %d (%d bytes of data): released %d times after Marshal", i, len(data), released)
		}
		if !small {
			last := enc[len(enc)-1].ReadOnlyData()
			if len(last) != len(data) || &last[0] != &data[0] {
				t.Fatalf("message %d: the data is not sent from the caller's bytes", i)
			}
		}
		flat := enc.Materialize()
		got := &nodepb.WriteChunkRequest{}
		if err := proto.Unmarshal(flat, got); err != nil || !proto.Equal(got, want) {
			t.Fatalf("message %d: protobuf decodes %v (%v), want %v", i, got, err, want)
		}
		var w ChunkWrite
		if err := (ChunkCodec{}).Unmarshal(splitFrames(flat), &w); err != nil || !proto.Equal(w.WriteChunkRequest, want) {
			t.Fatalf("message %d: ChunkWrite decodes %v (%v), want %v", i, w.WriteChunkRequest, err, want)
		}
		w.Release()
		// gRPC's transport holds a reference of its own until it wrote
		// the message, and frees it after the sender's.
		enc.Ref()
		enc.Free()
		if !small && released != 0 {
			t.Fatalf("message %d: released while the transport holds the data", i)
		}
		enc.Free()
		s.ReleaseUnsent() // taken by the codec: gRPC released it
		if released != 1 {
			t.Fatalf("message %d: released %d times", i, released)
		}
		if !bytes.Equal(data, want.Data) {
			t.Fatalf("message %d: the caller's data changed", i)
		}
	}
}

// A ChunkSend the codec never took is released by ReleaseUnsent, once; one
// marshalled twice, or whose request carries data, is refused (and
// released); another codec refuses it (not a protobuf message).
func TestChunkSendRelease(t *testing.T) {
	released := 0
	s := NewChunkSend(&nodepb.WriteChunkRequest{}, make([]byte, 4096), func() { released++ })
	s.ReleaseUnsent()
	s.ReleaseUnsent()
	if released != 1 {
		t.Fatalf("released %d times by ReleaseUnsent", released)
	}
	if _, err := (ChunkCodec{}).Marshal(s); err == nil {
		t.Fatal("a released ChunkSend was marshalled")
	}
	released = 0
	s = NewChunkSend(&nodepb.WriteChunkRequest{Data: []byte{1}}, make([]byte, 4096), func() { released++ })
	if _, err := (ChunkCodec{}).Marshal(s); err == nil || released != 1 {
		t.Fatalf("a request with data of its own: %v, released %d times", err, released)
	}
	if _, ok := any(s).(proto.Message); ok {
		t.Fatal("ChunkSend is a protobuf message: another codec would send it without its data")
	}
}
