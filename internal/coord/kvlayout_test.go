package coord

import (
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/node"
	"github.com/flashmend/flashmend/internal/wire"
)

func TestPlaceKVShards(t *testing.T) {
	members := []base.NodeID{6, 2, 4, 1, 3, 5}
	splits := [][]byte{[]byte("g"), []byte("n"), []byte("t")}
	m, err := placeKVShards(members, splits, 3)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := placeKVShards([]base.NodeID{1, 2, 3, 4, 5, 6}, splits, 3)
	if !proto.Equal(m, again) {
		t.Fatal("placement depends on the order members are listed in")
	}
	used := map[uint64]bool{}
	var prevEnd []byte
	for i, s := range m.Shards {
		if s.Id != uint64(i+1) || string(s.Start) != string(prevEnd) {
			t.Fatalf("shard %d: %v", i, s)
		}
		prevEnd = s.End
		if len(s.Replicas) != 3 {
			t.Fatalf("shard %d has %d replicas", s.Id, len(s.Replicas))
		}
		for r, n := range s.Replicas {
			if r != n || n < 1 || n > 6 {
				t.Fatalf("shard %d: replica %d on node %d", s.Id, r, n)
			}
			used[n] = true
		}
	}
	if len(prevEnd) != 0 {
		t.Fatal("last shard is bounded")
	}
	if len(used) <= 3 {
		t.Fatalf("four shards all on the same three nodes: %v", m)
	}
	for _, tc := range []struct {
		members  []base.NodeID
		splits   [][]byte
		replicas int
	}{
		{members, [][]byte{[]byte("n"), []byte("g")}, 3},
		{members, [][]byte{{}}, 3},
		{members, nil, 8},
	} {
		if _, err := placeKVShards(tc.members, tc.splits, tc.replicas); !base.IsInvalidArgument(err) {
			t.Fatalf("%v: %v", tc, err)
		}
	}
	if _, err := placeKVShards([]base.NodeID{1, 2}, nil, 3); err == nil {
		t.Fatal("three replicas placed on two nodes")
	}
}

// TestKVLayout: none until created, created once over the live members,
// the same afterwards; a coordinator with none adopts a node's.
func TestKVLayout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{Dir: t.TempDir(), LeaseTTLSeconds: 2, UnsafeNoFsync: true, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 4; i++ {
		n, err := node.Start(ctx, node.Config{Dir: t.TempDir(), CoordinatorAddr: c.Addr(), HeartbeatInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
	}
	_, err = c.KVLayout(ctx, &coordpb.KVLayoutRequest{})
	if err = wire.FromStatus(err); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("layout before any was created: %v", err)
	}
	resp, err := c.KVLayout(ctx, &coordpb.KVLayoutRequest{Create: true, Splits: [][]byte{[]byte("m")}})
	if err != nil || !resp.Created || len(resp.Layout.Shards) != 2 {
		t.Fatalf("create: %v %v", resp, err)
	}
	for _, s := range resp.Layout.Shards {
		for _, n := range s.Replicas {
			if n < 1 || n > 4 {
				t.Fatalf("replica on node %d, not a member", n)
			}
		}
	}
	for _, req := range []*coordpb.KVLayoutRequest{
		{},
		{Create: true, Splits: [][]byte{[]byte("a"), []byte("b")}},
		{Adopt: &kvpb.ShardMap{Shards: []*kvpb.ShardPlacement{{Id: 9, Replicas: map[uint64]uint64{1: 1}}}}},
	} {
		again, err := c.KVLayout(ctx, req)
		if err != nil || again.Created || !proto.Equal(again.Layout, resp.Layout) {
			t.Fatalf("%v: layout changed or failed: %v %v", req, again, err)
		}
	}

	// A coordinator whose store has no layout takes back the one a node
	// holds, even before any member joins.
	c2, err := Start(ctx, Config{Dir: t.TempDir(), UnsafeNoFsync: true, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	adopted, err := c2.KVLayout(ctx, &coordpb.KVLayoutRequest{Adopt: resp.Layout})
	if err != nil || !adopted.Created || !proto.Equal(adopted.Layout, resp.Layout) {
		t.Fatalf("adopt: %v %v", adopted, err)
	}
}
