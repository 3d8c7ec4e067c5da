package wire

import (
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// The sending side of the streamed chunk write (Node.WriteChunks): a PUT
// sends every chunk once per replica, and protobuf's marshal copies the
// chunk's 64 KiB into the message's buffer before gRPC's transport copies
// it again into its write buffer. ChunkSend goes out as its small fields,
// encoded, followed by a reference to the chunk's bytes: the transport
// reads them where they are, and the sender learns from the release
// callback when gRPC no longer refers to them.

// ChunkSend is a WriteChunkRequest to send with ClientStream.SendMsg on a
// connection that uses ChunkCodec, whose data ChunkCodec does not copy. Req
// carries every field but the data (its Data must be
// empty); Data is sent as the request's data field. Once ChunkCodec has
// taken the message, gRPC holds Data (reference counted) until its
// transport has written it to the connection or dropped it, and then calls
// the release function, once, from any goroutine: Data must not change
// until then. A send that fails before the codec took the message never
// calls it: the sender then calls ReleaseUnsent, which calls release unless
// the codec took the message.
//
// NB: it is deliberately not a proto.Message: a connection with another
// codec refuses it instead of sending the request without its data.
type ChunkSend struct {
	Req     *nodepb.WriteChunkRequest
	Data    []byte
	release func()
	taken   atomic.Bool
}

// NewChunkSend returns a ChunkSend of req (whose Data must be empty) with
// data, and release (nil: nothing) called once gRPC no longer refers to
// data (see ChunkSend).
func NewChunkSend(req *nodepb.WriteChunkRequest, data []byte, release func()) *ChunkSend {
	if release == nil {
		release = func() {}
	}
	return &ChunkSend{Req: req, Data: data, release: release}
}

// ReleaseUnsent calls the release function unless ChunkCodec took the
// message (gRPC then calls it): for a SendMsg that returned an error. It is
// idempotent.
func (s *ChunkSend) ReleaseUnsent() {
	if s.taken.CompareAndSwap(false, true) {
		s.release()
	}
}

// releaser is the mem.BufferPool of one ChunkSend's data: gRPC "returns"
// the data to it when the last reference goes, which calls release.
type releaser struct{ release func() }

func (r releaser) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (r releaser) Put(*[]byte) { r.release() }

// marshalChunkSend encodes s as protobuf's encoding of its request with its
// data as field fieldWriteData, placed last (protobuf's decoders take fields
// in any order; ChunkWrite's does): the other fields, the data's tag and
// length in one buffer, then the data itself, not copied. Data of at most
// mem's pooling threshold is copied and released at once (gRPC would not
// count references to so small a buffer).
func marshalChunkSend(s *ChunkSend) (mem.BufferSlice, error) {
	if !s.taken.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("wire: chunk send of %v marshalled twice or after ReleaseUnsent", s.Req.GetChunk())
	}
	req := s.Req
	if req == nil {
		req = &nodepb.WriteChunkRequest{}
	}
	if len(req.Data) != 0 {
		s.release()
		return nil, fmt.Errorf("wire: chunk send of %v: the request carries data of its own", req.GetChunk())
	}
	data := s.Data[:len(s.Data):len(s.Data)]
	size := proto.Size(req)
	small := mem.IsBelowBufferPoolingThreshold(len(data))
	n := size + protowire.SizeTag(fieldWriteData) + protowire.SizeVarint(uint64(len(data)))
	if small {
		n += len(data)
	}
	hdr := make([]byte, 0, n)
	hdr, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(hdr, req)
	if err != nil {
		s.release()
		return nil, err
	}
	if len(data) == 0 {
		s.release()
		return mem.BufferSlice{mem.SliceBuffer(hdr)}, nil
	}
	hdr = protowire.AppendTag(hdr, fieldWriteData, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(len(data)))
	if small {
		hdr = append(hdr, data...)
		s.release()
		return mem.BufferSlice{mem.SliceBuffer(hdr)}, nil
	}
	return mem.BufferSlice{mem.SliceBuffer(hdr), mem.NewBuffer(&data, releaser{s.release})}, nil
}
