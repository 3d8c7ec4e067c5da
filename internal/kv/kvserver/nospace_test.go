package kvserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/torture/faultfs"
)

// TestDeviceFillsOnTwoNodesKeepTheShard is named after the miss of the
// torture harness's nemesis on flash (seed 20261125): device fills on
// nodes n6, n5 and n2 fail-stopped replicas of shards s1, s2 and s6 on two
// of their three nodes each ("raft log sync: no space"), and the KV store
// never answered every key again. A replica that fail-stopped because its
// device was full was replaced by a fresh, empty one under a vote floor
// above every log (its intact files removed); with two such replicas the
// shard's one remaining replica could never be elected (the fresh ones
// vote for no one until a barrier of theirs applies, which needs a
// leader). Now a replica that fail-stopped on "no space" is reopened from
// its own files once the device takes writes again, as after a crash: the
// files are intact, and nothing it acknowledged was unsynced. Here the
// devices of n1 and n2 are full at once (every write under kv/n1/ and
// kv/n2/ refused with "no space"), both replicas fail-stop, room comes
// back, and the shard must answer every key again.
func TestDeviceFillsOnTwoNodesKeepTheShard(t *testing.T) {
	ffs := faultfs.New(vfs.NewMem())
	c, err := kvcluster.Start(kvcluster.Config{FS: ffs, Dir: "kv", Options: kv.Options{CacheBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := c.NewClient(kvclient.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const keys = 100
	for i := 0; i < keys; i++ {
		for {
			_, err := cl.Put(ctx, key(i), value(i))
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
	}

	old1, old2 := c.Node(1).Replica(1), c.Node(2).Replica(1)
	ffs.Set(&faultfs.Rule{Kind: faultfs.WriteError, NoSpace: true, Match: func(p string) bool {
		return strings.HasPrefix(p, "kv/n1/") || strings.HasPrefix(p, "kv/n2/")
	}})
	// A write makes every replica append to its raft log: n1's and n2's
	// cannot, and fail-stop (the write itself cannot commit meanwhile).
	for i := 0; old1.Failed() == nil || old2.Failed() == nil; i++ {
		if ctx.Err() != nil {
			t.Fatalf("the replicas on the full devices did not fail-stop: n1 %v, n2 %v", old1.Failed(), old2.Failed())
		}
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = cl.Put(wctx, []byte(fmt.Sprintf("trigger-%d", i)), []byte("x"))
		wcancel()
	}
	for _, err := range []error{old1.Failed(), old2.Failed()} {
		if !base.IsNoSpace(err) {
			t.Fatalf("failure %v does not say the device had no space", err)
		}
	}

	// Room again: the shard answers every key, through its leader.
	ffs.Set(nil)
	for i := 0; i < keys; i++ {
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			v, found, err := cl.Get(rctx, key(i), kvclient.Strong())
			rcancel()
			if err == nil {
				if !found || string(v) != string(value(i)) {
					t.Fatalf("key %d after the fills: found %v, %q", i, found, v)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the shard never answered key %d after the devices had room again: %v (n1: %v; n2: %v)",
					i, err, c.Node(1).Failures(), c.Node(2).Failures())
			}
		}
	}
	if _, err := cl.Put(ctx, key(keys), value(keys)); err != nil {
		t.Fatalf("a put after the fills: %v", err)
	}
	// Both replicas came back from their own files, holding every key.
	eventual := &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL}
	for _, id := range []base.NodeID{1, 2} {
		n := c.Node(id)
		fails := n.Failures()
		if len(fails) == 0 || !fails[len(fails)-1].Reopened {
			t.Fatalf("n%d's failures: %v, want its replica reopened from its files", id, fails)
		}
		t.Logf("n%d: %v", id, fails[len(fails)-1])
		waitFor(t, time.Minute, fmt.Sprintf("n%d's replica holds every key", id), func() bool {
			r := n.Replica(1)
			if r == nil {
				return false
			}
			for i := 0; i <= keys; i++ {
				v, found, _, err := r.Get(ctx, key(i), eventual)
				if err != nil || !found || string(v) != string(value(i)) {
					return false
				}
			}
			return true
		})
	}
}
