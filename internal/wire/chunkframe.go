package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// The streamed chunk read (Node.ReadChunks) moves nearly every byte a GET
// reads, one 64 KiB chunk per message. Two of the copies protobuf makes of
// a chunk on its way are avoided here, by hand-coding that one message
// (field numbers from node.proto; TestChunkFrameMatchesProto checks every
// field of both messages against protobuf's own coding):
//
//   - Sending (ChunkFrame): the node reads the chunk into a buffer of the
//     pool and hands it to gRPC as it is, after a small header with the
//     other fields; gRPC returns the buffer to the pool once the transport
//     has written it. Protobuf's marshal would copy it into a new buffer
//     first.
//   - Receiving (ChunkCodec.Unmarshal of a ReadChunksResponse): the
//     message's bytes are gathered once into a new buffer (gRPC hands them
//     over in 16 KiB frames) and the chunk's data aliases that buffer;
//     protobuf's unmarshal would copy the data out again.

// ChunkFrame is a ReadChunksResponse to send whose chunk data is held in
// Buf, a buffer of ChunkBufferPool (Resp.Chunk.Data is (*Buf)[:n]): sent
// with ServerStream.SendMsg, the codec hands the data to gRPC without
// copying it, and gRPC puts Buf back into the pool when it is done with it.
// The sender must not touch Resp or Buf after SendMsg.
type ChunkFrame struct {
	Resp *nodepb.ReadChunksResponse
	Buf  *[]byte
}

// Field numbers of node.proto's ReadChunksResponse and ReadChunkResponse.
const (
	fieldChunksIndex   = 1
	fieldChunksChunk   = 2
	fieldChunksMissing = 3
	fieldChunksError   = 4

	fieldChunkData      = 1
	fieldChunkSums      = 2
	fieldChunkSumsValid = 3
	fieldChunkCorrupt   = 4
	fieldChunkTransient = 5
)

// appendChunkHeader appends the encoding of c without its data field,
// followed by the data field's tag and length (the data follows).
func appendChunkHeader(b []byte, c *nodepb.ReadChunkResponse) []byte {
	if len(c.Sums) > 0 {
		b = protowire.AppendTag(b, fieldChunkSums, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(4*len(c.Sums)))
		for _, s := range c.Sums {
			b = protowire.AppendFixed32(b, s)
		}
	}
	b = appendBool(b, fieldChunkSumsValid, c.SumsValid)
	b = appendBool(b, fieldChunkCorrupt, c.Corrupt)
	b = appendBool(b, fieldChunkTransient, c.Transient)
	if len(c.Data) > 0 {
		b = protowire.AppendTag(b, fieldChunkData, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(c.Data)))
	}
	return b
}

func appendBool(b []byte, field protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// marshalChunkFrame encodes f as header and data buffers.
func marshalChunkFrame(f *ChunkFrame) (mem.BufferSlice, error) {
	r := f.Resp
	if r == nil {
		return nil, errors.New("wire: chunk frame without a response")
	}
	var hdr []byte
	if r.Index != 0 {
		hdr = protowire.AppendTag(hdr, fieldChunksIndex, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, uint64(r.Index))
	}
	hdr = appendBool(hdr, fieldChunksMissing, r.Missing)
	if r.Error != "" {
		hdr = protowire.AppendTag(hdr, fieldChunksError, protowire.BytesType)
		hdr = protowire.AppendString(hdr, r.Error)
	}
	var data []byte
	if c := r.Chunk; c != nil {
		data = c.Data
		inner := appendChunkHeader(nil, c)
		hdr = protowire.AppendTag(hdr, fieldChunksChunk, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(len(inner)+len(data)))
		hdr = append(hdr, inner...)
	}
	out := mem.BufferSlice{mem.SliceBuffer(hdr)}
	switch {
	case len(data) == 0:
		if f.Buf != nil {
			ChunkBufferPool.Put(f.Buf)
		}
	case f.Buf != nil && len(*f.Buf) > 0 && &(*f.Buf)[0] == &data[0] && len(data) <= cap(*f.Buf):
		*f.Buf = (*f.Buf)[:len(data)]
		out = append(out, mem.NewBuffer(f.Buf, ChunkBufferPool))
	default:
		// The data is not the pooled buffer's (a re-read): sent as it is,
		// left to the collector; the buffer goes back to the pool.
		if f.Buf != nil {
			ChunkBufferPool.Put(f.Buf)
		}
		out = append(out, mem.SliceBuffer(data))
	}
	return out, nil
}

// unmarshalChunks decodes a ReadChunksResponse from b into m; the chunk's
// data aliases b.
func unmarshalChunks(b []byte, m *nodepb.ReadChunksResponse) error {
	m.Reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if !num.IsValid() {
			// ConsumeTag refuses 0 but not numbers past MaxValidNumber;
			// protobuf refuses both (found by FuzzUnmarshalChunks).
			return fmt.Errorf("wire: field number %d out of range", num)
		}
		b = b[n:]
		switch {
		case num == fieldChunksIndex && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Index, b = uint32(v), b[n:]
		case num == fieldChunksMissing && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Missing, b = v != 0, b[n:]
		case num == fieldChunksError && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if !utf8.Valid(v) {
				return errors.New("wire: error field is not valid UTF-8")
			}
			m.Error, b = string(v), b[n:]
		case num == fieldChunksChunk && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if m.Chunk == nil {
				m.Chunk = &nodepb.ReadChunkResponse{}
			}
			if err := unmarshalChunk(v, m.Chunk); err != nil {
				return err
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}

// unmarshalChunk merges a ReadChunkResponse's encoding into c (a message
// field that occurs twice is merged, as protobuf does).
func unmarshalChunk(b []byte, c *nodepb.ReadChunkResponse) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if !num.IsValid() {
			// ConsumeTag refuses 0 but not numbers past MaxValidNumber;
			// protobuf refuses both (found by FuzzUnmarshalChunks).
			return fmt.Errorf("wire: field number %d out of range", num)
		}
		b = b[n:]
		switch {
		case num == fieldChunkData && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			c.Data, b = v, b[n:]
		case num == fieldChunkSums && typ == protowire.BytesType: // packed
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if len(v)%4 != 0 {
				return fmt.Errorf("wire: packed sums of %d bytes", len(v))
			}
			for len(v) > 0 {
				s, k := protowire.ConsumeFixed32(v)
				if k < 0 {
					return protowire.ParseError(k)
				}
				c.Sums, v = append(c.Sums, s), v[k:]
			}
			b = b[n:]
		case num == fieldChunkSums && typ == protowire.Fixed32Type: // unpacked
			s, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			c.Sums, b = append(c.Sums, s), b[n:]
		case (num == fieldChunkSumsValid || num == fieldChunkCorrupt || num == fieldChunkTransient) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			switch num {
			case fieldChunkSumsValid:
				c.SumsValid = v != 0
			case fieldChunkCorrupt:
				c.Corrupt = v != 0
			default:
				c.Transient = v != 0
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}
