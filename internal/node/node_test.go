package node

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
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
	fs, _ := objstore.OpenFileStore(dir+"/store", false)
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
