package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/testseed"
)

// waitFor polls cond until it holds or the (generous) deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeadNodeDataIsRecreatedElsewhere: the scrubber re-creates the
// replicas and shards of a node that stays down on other nodes, moves the
// placements there, and the blobs left on the dead node are deleted when it
// comes back.
func TestDeadNodeDataIsRecreatedElsewhere(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 7, devcluster.Options{
		LeaseTTLSeconds: 2,
		Scrub:           &client.ScrubberOptions{PassInterval: 100 * time.Millisecond, ReprotectAfter: 100 * time.Millisecond},
	})
	ctx := context.Background()
	objects := map[string][]byte{}
	for i := 0; i < 8; i++ {
		red := rep
		if i%2 == 1 {
			red = ec
		}
		data := randomBytes(rng, 1+rng.Intn(6*direct.ChunkSize))
		key := fmt.Sprintf("reprotect/%d", i)
		if _, err := c.Put(ctx, key, data, red); err != nil {
			t.Fatal(err)
		}
		objects[key] = data
	}
	const victim = 3 // node 3
	var held []*objectpb.ObjectRecord
	for key := range objects {
		rec, err := c.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(rec.Placement, victim) {
			held = append(held, rec)
		}
	}
	if len(held) == 0 {
		t.Fatal("no object on the victim node")
	}
	if err := cl.KillNode(victim - 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every placement to leave the dead node", func() bool {
		for key := range objects {
			rec, err := c.Stat(ctx, key)
			if err != nil || slices.Contains(rec.Placement, victim) {
				return false
			}
		}
		return true
	})
	if st := cl.Scrubber().Stats(); st.Reprotected < int64(len(held)) {
		t.Fatalf("scrubber stats %s: want at least %d re-protected", st, len(held))
	}
	for key, data := range objects {
		rec, err := c.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		chunks := int((rec.SizeBytes + direct.ChunkSize - 1) / direct.ChunkSize)
		if rec.Redundancy == ec {
			chunks = int((rec.SizeBytes + 4*direct.ChunkSize - 1) / (4 * direct.ChunkSize))
		}
		for i := 0; i < chunks; i++ {
			storeIsClean(t, cl, rec, i)
		}
		if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after re-protection: %v", key, err)
		}
	}
	// The dead node comes back: what it held is garbage now.
	if err := cl.StartNode(ctx, victim-1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the returning node's stale blobs to be deleted", func() bool {
		blobs, err := cl.Node(victim - 1).Chunks().Blobs()
		if err != nil {
			return false
		}
		for _, b := range blobs {
			for _, rec := range held {
				if b.Object == rec.Object && b.Version == rec.Version {
					return false
				}
			}
		}
		return true
	})
}
