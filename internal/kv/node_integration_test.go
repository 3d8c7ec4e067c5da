package kv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvserver"
	"github.com/flashmend/flashmend/internal/node"
)

// TestKVOnStorageNodes hosts the KV services on internal/node storage nodes
// (through Config.RegisterServices) with replicas on real directories.
func TestKVOnStorageNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := []base.NodeID{1, 2, 3}
	svcs := map[base.NodeID]*kvserver.Service{}
	addrs := map[base.NodeID]string{}
	for _, id := range ids {
		svc := &kvserver.Service{}
		sn, err := node.Start(ctx, node.Config{Dir: t.TempDir(), NodeID: id, RegisterServices: svc.RegisterServices})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sn.Close() })
		svcs[id], addrs[id] = svc, sn.Addr()
	}
	layout := kvapi.UniformLayout(ids, "m")
	for _, id := range ids {
		kn, err := kvserver.NewNode(kvserver.Config{ID: id, Layout: layout, Addrs: addrs, FS: vfs.Default, Dir: t.TempDir(),
			Options: kv.Options{CacheBytes: -1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kn.Close() })
		svcs[id].Attach(kn)
	}
	cl, err := kvclient.New(layout, addrs, kvclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 20; i++ {
		k := []byte(fmt.Sprintf("%c-key", 'a'+i))
		if _, err := cl.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := cl.Scan(ctx, nil, nil, 0)
	if err != nil || len(rows) != 20 {
		t.Fatalf("scan: %d rows, %v", len(rows), err)
	}
}
