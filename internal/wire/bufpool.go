package wire

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
)

// ChunkBufferPool is the gRPC buffer pool of the chunk data path (the
// client's node connections and the node's server): size classes that fit
// a 64 KiB chunk message (128 KiB) and an EC row of four chunks (256 KiB,
// a streamed GET's assembled row), and buffers handed out without being
// zeroed.
//
// NB: gRPC's default pool rounds a chunk message (64 KiB and its header)
// up to its 1 MiB class and zeroes all of it on every Get: 16 bytes cleared
// per byte carried, about a fifth of a GET's CPU. gRPC fills every buffer
// it gets from a pool (a frame read, a message marshalled) before reading
// it, so the zeroing protects nothing here: the buffers never leave the
// process.
var ChunkBufferPool mem.BufferPool = newDirtyPool(4<<10, 16<<10, 32<<10, 128<<10, 256<<10, 1<<20)

// dirtyPool is a tiered buffer pool that does not zero what it returns.
type dirtyPool struct {
	sizes []int
	pools []sync.Pool
}

func newDirtyPool(sizes ...int) *dirtyPool {
	return &dirtyPool{sizes: sizes, pools: make([]sync.Pool, len(sizes))}
}

func (p *dirtyPool) class(n int) int {
	for i, s := range p.sizes {
		if n <= s {
			return i
		}
	}
	return -1
}

// Get implements mem.BufferPool.
func (p *dirtyPool) Get(n int) *[]byte {
	i := p.class(n)
	if i < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.pools[i].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, p.sizes[i])
	return &b
}

// Put implements mem.BufferPool.
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	i := p.class(c)
	if i < 0 || p.sizes[i] != c {
		return // not one of ours: left to the collector
	}
	*b = (*b)[:0]
	p.pools[i].Put(b)
}

// ChunkCodec is gRPC's protobuf codec with its buffers from
// ChunkBufferPool (gRPC's own takes them from its default pool, which
// zeroes them). It handles every protobuf message; the node's server and
// the client's node connections force it.
type ChunkCodec struct{}

var _ encoding.CodecV2 = ChunkCodec{}

// Marshal implements encoding.CodecV2.
func (ChunkCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*ChunkFrame); ok {
		return marshalChunkFrame(f)
	}
	if s, ok := v.(*ChunkSend); ok {
		// The chunk's data referred to, not copied (chunksend.go).
		return marshalChunkSend(s)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("wire: cannot marshal %T: not a protobuf message", v)
	}
	size := proto.Size(m)
	// NB: UseCachedSize reuses the size computed just above; the message
	// is not changed in between.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := ChunkBufferPool.Get(size)
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		ChunkBufferPool.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, ChunkBufferPool)}, nil
}

// Unmarshal implements encoding.CodecV2. The message's bytes fields are
// copies (proto.Unmarshal does not alias its input), so the buffer goes
// back to the pool at once.
func (ChunkCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*nodepb.ReadChunksResponse); ok {
		// The chunk's data copied once, alone, into a pooled buffer
		// that the receiver may recycle (chunkframe.go).
		return unmarshalChunksFrom(data, m)
	}
	if w, ok := v.(*ChunkWrite); ok {
		// Gathered once into a pooled buffer that the chunk's data then
		// aliases, until the receiver releases it (chunkwrite.go).
		return unmarshalChunkWrite(data, w)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("wire: cannot unmarshal into %T: not a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(ChunkBufferPool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// Name implements encoding.CodecV2: it is the protobuf codec on the wire.
func (ChunkCodec) Name() string { return "proto" }
