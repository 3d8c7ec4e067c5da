package wire

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// The streamed chunk write (Node.WriteChunks) moves nearly every byte a PUT
// writes, one 64 KiB chunk per message. On the node, protobuf's unmarshal
// would copy each chunk twice (gathering gRPC's 16 KiB frames into one
// buffer, then out of it into a new slice for the data field, garbage
// after the write). ChunkWrite gathers the message once into a buffer of
// ChunkBufferPool, which the data then aliases, and the node hands the
// buffer back when the chunk is stored.

// ChunkWrite is a WriteChunkRequest to receive with ServerStream.RecvMsg
// whose Data aliases a buffer of ChunkBufferPool: the receiver calls
// Release once it no longer needs the request (the data is overwritten by
// later messages after that). It is a proto.Message (the embedded
// request's), so interceptors that count messages see the request.
type ChunkWrite struct {
	*nodepb.WriteChunkRequest
	buf *[]byte
}

// Release hands the request's buffer back to the pool; the request's data
// must not be used after it. Release is idempotent.
func (w *ChunkWrite) Release() {
	if w.buf != nil {
		ChunkBufferPool.Put(w.buf)
		w.buf = nil
	}
	w.WriteChunkRequest = nil
}

// fieldWriteData is node.proto's WriteChunkRequest.data.
const fieldWriteData = 2

// unmarshalChunkWrite decodes a WriteChunkRequest from data into w, the data
// field aliasing one pooled buffer and every other field decoded by
// protobuf (they are small: the chunk's reference, sums and blob info).
func unmarshalChunkWrite(data mem.BufferSlice, w *ChunkWrite) error {
	w.Release()
	buf := ChunkBufferPool.Get(data.Len())
	data.CopyTo(*buf)
	b := *buf
	m := &nodepb.WriteChunkRequest{}
	var rest []byte // every field but the data, for protobuf
	var chunk []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			ChunkBufferPool.Put(buf)
			return protowire.ParseError(n)
		}
		if !num.IsValid() {
			ChunkBufferPool.Put(buf)
			return fmt.Errorf("wire: field number %d out of range", num)
		}
		field := b
		b = b[n:]
		if num == fieldWriteData && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				ChunkBufferPool.Put(buf)
				return protowire.ParseError(n)
			}
			chunk, b = v, b[n:] // the last one wins, as in protobuf
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			ChunkBufferPool.Put(buf)
			return protowire.ParseError(n)
		}
		rest = append(rest, field[:len(field)-len(b)+n]...)
		b = b[n:]
	}
	if len(rest) > 0 {
		if err := proto.Unmarshal(rest, m); err != nil {
			ChunkBufferPool.Put(buf)
			return err
		}
	}
	if len(chunk) > 0 {
		m.Data = chunk
	}
	w.WriteChunkRequest, w.buf = m, buf
	return nil
}
