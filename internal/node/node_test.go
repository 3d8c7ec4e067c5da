package node

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/wire"
)

func dial(t *testing.T, addr string) nodepb.NodeClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return nodepb.NewNodeClient(conn)
}

func TestStandaloneNodeServesChunksAndRepairsIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n, err := Start(ctx, Config{Dir: dir, NodeID: 7})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, n.Addr())
	ref := &nodepb.ChunkRef{Object: 1, Version: 2, Index: 0}
	id := direct.ChunkID{Object: 1, Version: 2}
	data := bytes.Repeat([]byte("flash"), 1000)
	sums := direct.Sums(id, data)
	info := &nodepb.BlobInfo{Key: "k", Object: 1, Version: 2, Redundancy: "rep", Chunks: 1}
	if _, err := c.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: ref, Data: data, Sums: sums, Info: info}); err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), data...)
	bad[3] ^= 8
	if _, err := c.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: ref, Data: bad, Sums: sums}); !base.IsCorruption(wire.FromStatus(err)) {
		t.Fatalf("corrupt write: %v", err)
	}
	for _, req := range []*nodepb.WriteChunkRequest{
		{Data: data, Sums: sums},
		{Chunk: &nodepb.ChunkRef{Object: 1}, Data: data, Sums: sums},
		{Chunk: &nodepb.ChunkRef{Object: 1, Version: 2, Shard: 9}, Data: data, Sums: sums},
		{Chunk: ref, Data: data, Sums: sums[:1]},
		{Chunk: ref, Data: data, Sums: sums, Info: &nodepb.BlobInfo{Key: "k", Object: 1, Version: 3}},
	} {
		if _, err := c.WriteChunk(ctx, req); !base.IsInvalidArgument(wire.FromStatus(err)) {
			t.Fatalf("malformed write %v: %v", req, err)
		}
	}
	r, err := c.ReadChunk(ctx, &nodepb.ReadChunkRequest{Chunk: ref})
	if err != nil || !bytes.Equal(r.Data, data) || r.Corrupt {
		t.Fatalf("read %v", err)
	}
	if _, err := c.ReadChunk(ctx, &nodepb.ReadChunkRequest{Chunk: &nodepb.ChunkRef{Object: 1, Version: 5}}); !objstore.IsNotFound(wire.FromStatus(err)) {
		t.Fatalf("missing chunk: %v", err)
	}
	if _, err := c.CorruptChunk(ctx, &nodepb.CorruptChunkRequest{Chunk: ref, OffsetBytes: 10, Bits: 3}); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.ReadChunk(ctx, &nodepb.ReadChunkRequest{Chunk: ref}); !r.Corrupt || bytes.Equal(r.Data, data) {
		t.Fatal("corruption not reported")
	}
	if _, err := c.FailDie(ctx, &nodepb.FailDieRequest{Die: 0}); !base.IsInvalidArgument(wire.FromStatus(err)) {
		t.Fatalf("fail-die on a file store: %v", err)
	}
	if _, err := c.InjectUBER(ctx, &nodepb.InjectUBERRequest{Rate: -1}); !base.IsInvalidArgument(wire.FromStatus(err)) {
		t.Fatalf("bad UBER: %v", err)
	}
	blobs, err := c.ListBlobs(ctx, &nodepb.ListBlobsRequest{})
	if err != nil || len(blobs.Blobs) != 1 || blobs.Blobs[0].Key != "k" {
		t.Fatalf("blobs %v %v", blobs, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// Corrupt one copy of the identity file and of the blob index entry:
	// the node starts and rewrites them.
	fs, _ := filestore.Open(dir+"/store", false)
	if err := fs.FlipBits(objstore.CopyNames(identityFile)[1], 50, 4); err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(objstore.CopyNames(identityFile)[2]); err != nil {
		t.Fatal(err)
	}
	blobNames, _ := fs.List("i/")
	if len(blobNames) != objstore.MetaCopies {
		t.Fatalf("index entry files %v", blobNames)
	}
	if err := fs.FlipBits(blobNames[0], 20, 1); err != nil {
		t.Fatal(err)
	}
	n, err = Start(ctx, Config{Dir: dir, NodeID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.ID() != 7 || n.Stats().Devices[0].MetaRepaired != 3 {
		t.Fatalf("restart: id %s stats %v", n.ID(), n.Stats())
	}
	if _, err := Start(ctx, Config{Dir: t.TempDir()}); !base.IsInvalidArgument(err) {
		t.Fatalf("standalone without ID: %v", err)
	}
}

// ReadChunks answers many chunks in one call, in the order asked, each
// verified as ReadChunk verifies it: a corrupt chunk comes back marked
// corrupt, a missing one as missing, and the call goes on after both.
func TestReadChunksStreamsInOrder(t *testing.T) {
	ctx := context.Background()
	n, err := Start(ctx, Config{Dir: t.TempDir(), NodeID: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := dial(t, n.Addr())
	const chunks = 12
	data := make([][]byte, chunks)
	for i := range data {
		id := direct.ChunkID{Object: 4, Version: 1, Shard: 2, Index: uint32(i)}
		data[i] = bytes.Repeat([]byte{byte(i + 1)}, 1000+i*5000)
		if i == 7 {
			continue // never written: missing
		}
		ref := &nodepb.ChunkRef{Object: 4, Version: 1, Shard: 2, Index: uint32(i)}
		if _, err := c.WriteChunk(ctx, &nodepb.WriteChunkRequest{Chunk: ref, Data: data[i], Sums: direct.Sums(id, data[i])}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CorruptChunk(ctx, &nodepb.CorruptChunkRequest{Chunk: &nodepb.ChunkRef{Object: 4, Version: 1, Shard: 2, Index: 3}, OffsetBytes: 5, Bits: 2}); err != nil {
		t.Fatal(err)
	}
	order := []uint32{11, 3, 7, 0, 5, 1, 2, 4, 6, 8, 9, 10}
	stream, err := c.ReadChunks(ctx, &nodepb.ReadChunksRequest{Object: 4, Version: 1, Shard: 2, Indexes: order})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range order {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("chunk %d: %v", want, err)
		}
		switch {
		case resp.Index != want:
			t.Fatalf("answer for chunk %d, want %d", resp.Index, want)
		case want == 7:
			if !resp.Missing || resp.Chunk != nil {
				t.Fatalf("missing chunk answered %v", resp)
			}
		case want == 3:
			if resp.Chunk == nil || !resp.Chunk.Corrupt || bytes.Equal(resp.Chunk.Data, data[3]) {
				t.Fatalf("corrupt chunk answered %v", resp)
			}
		default:
			if resp.Chunk == nil || resp.Chunk.Corrupt || !resp.Chunk.SumsValid || !bytes.Equal(resp.Chunk.Data, data[want]) {
				t.Fatalf("chunk %d answered wrong: %v", want, resp.Chunk)
			}
		}
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("answers past the chunks asked")
	}
	for _, req := range []*nodepb.ReadChunksRequest{
		{Object: 4, Version: 0, Indexes: []uint32{0}},
		{Object: 4, Version: 1, Shard: 9, Indexes: []uint32{0}},
		{Object: 4, Version: 1, Indexes: make([]uint32, MaxReadChunks+1)},
	} {
		s, err := c.ReadChunks(ctx, req)
		if err == nil {
			_, err = s.Recv()
		}
		if !base.IsInvalidArgument(wire.FromStatus(err)) {
			t.Fatalf("malformed ReadChunks %v: %v", req, err)
		}
	}
	if st := n.Stats().Devices[0]; st.ChunksRead != chunks-1 || st.Persistent != 1 {
		t.Fatalf("stats %v", st)
	}
}

// WriteChunks stores a stream of chunks as WriteChunk stores each one, over
// the data path's codec (the data aliasing pooled receive buffers) and over
// protobuf's own; the first chunk that fails ends the call with its error
// class, the chunks before it stored and none after it.
func TestWriteChunksStoresAStream(t *testing.T) {
	ctx := context.Background()
	n, err := Start(ctx, Config{Dir: t.TempDir(), NodeID: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dataPath, err := grpc.NewClient(n.Addr(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		experimental.WithBufferPool(wire.ChunkBufferPool)}, wire.DataPathDialOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer dataPath.Close()
	for version, c := range map[uint64]nodepb.NodeClient{1: nodepb.NewNodeClient(dataPath), 2: dial(t, n.Addr())} {
		const chunks = 9
		data := make([][]byte, chunks)
		write := func(last int, corruptAt int) error {
			stream, err := c.WriteChunks(ctx)
			if err != nil {
				return err
			}
			for i := 0; i <= last; i++ {
				id := direct.ChunkID{Object: 6, Version: version, Index: uint32(i)}
				data[i] = bytes.Repeat([]byte{byte(i + 1), byte(version)}, 100+i*3000)
				req := &nodepb.WriteChunkRequest{Chunk: &nodepb.ChunkRef{Object: 6, Version: version, Index: uint32(i)},
					Data: data[i], Sums: direct.Sums(id, data[i])}
				if i == 0 {
					req.Info = &nodepb.BlobInfo{Key: "stream", Object: 6, Version: version, Redundancy: "rep", Chunks: chunks}
				}
				if i == corruptAt {
					req.Data = append([]byte(nil), data[i]...)
					req.Data[7] ^= 1
				}
				if err := stream.Send(req); err != nil {
					break // the node ended the call: its status follows
				}
			}
			resp, err := stream.CloseAndRecv()
			if err == nil && resp.Chunks != uint32(last+1) {
				t.Fatalf("version %d: %d chunks stored, %d sent", version, resp.Chunks, last+1)
			}
			return wire.FromStatus(err)
		}
		if err := write(4, -1); err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		if err := write(chunks-1, 6); !base.IsCorruption(err) {
			t.Fatalf("version %d: a stream with a corrupt chunk: %v", version, err)
		}
		for i := 0; i < chunks; i++ {
			r, err := c.ReadChunk(ctx, &nodepb.ReadChunkRequest{Chunk: &nodepb.ChunkRef{Object: 6, Version: version, Index: uint32(i)}})
			switch {
			case i < 6 && (err != nil || !bytes.Equal(r.Data, data[i]) || r.Corrupt):
				t.Fatalf("version %d: chunk %d: %v", version, i, err)
			case i >= 6 && !objstore.IsNotFound(wire.FromStatus(err)):
				t.Fatalf("version %d: chunk %d stored after the corrupt one: %v", version, i, err)
			}
		}
		stream, err := c.WriteChunks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&nodepb.WriteChunkRequest{Chunk: &nodepb.ChunkRef{Object: 6}, Data: data[0]}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.CloseAndRecv(); !base.IsInvalidArgument(wire.FromStatus(err)) {
			t.Fatalf("version %d: malformed stream write: %v", version, err)
		}
	}
	blobs, err := dial(t, n.Addr()).ListBlobs(ctx, &nodepb.ListBlobsRequest{})
	if err != nil || len(blobs.Blobs) != 2 {
		t.Fatalf("blobs %v, %v", blobs, err)
	}
}
