package node

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/wire"
)

// Fuzz targets for what a storage node decodes: a WriteChunk request as it
// arrives on the wire (any bytes, unmarshalled as gRPC does), and the node
// identity file it reads at start. Seed corpora are in testdata/fuzz/; `go
// test` runs them, `flashmend torture fuzz` (or go test -fuzz=FuzzX)
// explores further.

// FuzzWriteChunkRequest: a request is rejected with a classified error
// (invalid argument, corruption, no space), or accepted and then the chunk
// reads back as exactly the bytes sent.
func FuzzWriteChunkRequest(f *testing.F) {
	id := direct.ChunkID{Object: 1, Version: 2}
	data := bytes.Repeat([]byte("flash"), 300)
	for _, req := range []*nodepb.WriteChunkRequest{
		{Chunk: &nodepb.ChunkRef{Object: 1, Version: 2}, Data: data, Sums: direct.Sums(id, data),
			Info: &nodepb.BlobInfo{Key: "k", Object: 1, Version: 2, Redundancy: "rep", Chunks: 1}},
		{Chunk: &nodepb.ChunkRef{Object: 1, Version: 2}, Data: data, Sums: direct.Sums(id, data)[:1]},
		{Chunk: &nodepb.ChunkRef{Object: 1, Version: 2, Shard: 9}, Data: data},
		{Chunk: &nodepb.ChunkRef{Object: 3, Version: 4}, Info: &nodepb.BlobInfo{Key: "empty", Object: 3, Version: 4}},
		{Chunk: &nodepb.ChunkRef{Object: 1, Version: 2, Index: 1}, Missing: true},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	n, err := Start(context.Background(), Config{Dir: f.TempDir(), NodeID: 7})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	s := &service{n: n}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req nodepb.WriteChunkRequest
		if proto.Unmarshal(raw, &req) != nil {
			return // gRPC rejects it before the handler
		}
		_, err := s.WriteChunk(context.Background(), &req)
		if err != nil {
			err = wire.FromStatus(err)
			if !base.IsInvalidArgument(err) && !base.IsCorruption(err) && !base.IsNoSpace(err) {
				t.Fatalf("WriteChunk(%v): unclassified error %v", &req, err)
			}
			return
		}
		if len(req.Data) == 0 {
			return
		}
		resp, err := s.ReadChunk(context.Background(), &nodepb.ReadChunkRequest{Chunk: req.Chunk})
		if err != nil || resp.Corrupt || !bytes.Equal(resp.Data, req.Data) {
			t.Fatalf("accepted write of %d bytes to %v reads back %d bytes, corrupt %v, %v", len(req.Data), req.Chunk, len(resp.GetData()), resp.GetCorrupt(), err)
		}
	})
}

// FuzzIdentityFile: whatever the identity file holds (in all three
// copies), the node starts as node 7 or refuses to start; it starts when
// the file is a valid identity of node 7 (or of no node yet).
func FuzzIdentityFile(f *testing.F) {
	f.Add([]byte(`{"cluster_id":"c","node_id":7,"format_version":1}`))
	f.Add([]byte(`{"node_id":0,"format_version":1}`))
	f.Add([]byte(`{"node_id":8,"format_version":1}`))
	f.Add([]byte(`{"node_id":7,"format_version":2}`))
	f.Add([]byte(`{"node_id":-1}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		dir := t.TempDir()
		st, err := filestore.Open(filepath.Join(dir, "store"), false)
		if err != nil {
			t.Fatal(err)
		}
		if err := objstore.NewMetaFiles(st).Write(identityFile, payload); err != nil {
			t.Fatal(err)
		}
		st.Close()
		var ident identity
		valid := json.Unmarshal(payload, &ident) == nil && ident.FormatVersion == formatVersion && (ident.NodeID == 0 || ident.NodeID == 7)
		n, err := Start(context.Background(), Config{Dir: dir, NodeID: 7})
		if err != nil {
			if valid {
				t.Fatalf("valid identity %s: node did not start: %v", payload, err)
			}
			return
		}
		defer n.Close()
		if n.ID() != 7 {
			t.Fatalf("identity %s: node started as %s", payload, n.ID())
		}
	})
}
