package client_test

import (
	"bytes"
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// storeIsClean checks, on the nodes themselves, that every replica or
// shard of chunk (row) i verifies.
func storeIsClean(t *testing.T, cl *devcluster.Cluster, rec *objectpb.ObjectRecord, i int) {
	t.Helper()
	for r, id := range rec.Placement {
		shard := 0
		if rec.Redundancy == ec {
			shard = r
		}
		cid := direct.ChunkID{Object: rec.Object, Version: rec.Version, Shard: uint32(shard), Index: uint32(i)}
		got, err := cl.Node(int(id - 1)).Chunks().ReadChunk(cid)
		if err != nil || got.Corrupt {
			t.Fatalf("replica %d (node %d) of %s still bad: %v %v", r, id, cid, got, err)
		}
	}
}

func TestREPChunkRepair(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 5, devcluster.Options{})
	ctx := context.Background()
	data := randomBytes(rng, 3*direct.ChunkSize+1000)
	const chunk = 1 // replicas are read from chunk%3 = 1 on
	at := int64(chunk*direct.ChunkSize + 777)
	for _, tc := range []struct {
		name     string
		corrupt  map[int]int64 // replica -> offset
		ok       bool
		voted    bool
		repaired int // by the read itself
	}{
		{"first replica", map[int]int64{1: at}, true, false, 1},
		{"first two replicas", map[int]int64{1: at, 2: at + 10}, true, false, 2},
		{"replica not read first", map[int]int64{0: at}, true, false, 0},
		{"all three, different bits", map[int]int64{0: at, 1: at + 1, 2: at + 2}, true, true, 3},
		{"all three, different sectors", map[int]int64{0: at, 1: at + 600, 2: at + 5000}, true, false, 3},
		{"all three, same bits on two", map[int]int64{0: at + 3, 1: at, 2: at}, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "rep/" + tc.name
			rec, err := c.Put(ctx, key, data, rep)
			if err != nil {
				t.Fatal(err)
			}
			for r, off := range tc.corrupt {
				if err := c.Corrupt(ctx, key, r, off, 3); err != nil {
					t.Fatal(err)
				}
			}
			got, report, err := c.GetWithReport(ctx, key, client.ModeDirect)
			if !tc.ok {
				if !base.IsDataLoss(err) || got != nil {
					t.Fatalf("want an explicit data-loss error and no data, got %d bytes, %v", len(got), err)
				}
				t.Logf("error as expected: %v", err)
				return
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read: %v (%s)", err, report)
			}
			if report.Repaired != tc.repaired || (report.Voted == 1) != tc.voted {
				t.Fatalf("report %s; want repaired %d voted %v", report, tc.repaired, tc.voted)
			}
			if tc.repaired < len(tc.corrupt) {
				// The scrubber finds what the read did not need to look at.
				srep, err := c.ScrubObject(ctx, rec, nil, nil)
				if err != nil || srep.Repaired != len(tc.corrupt)-tc.repaired {
					t.Fatalf("scrub: %s %v", srep, err)
				}
			}
			storeIsClean(t, cl, rec, chunk)
			if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after repair: %v", err)
			}
		})
	}
}

func TestECRowRepair(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	data := randomBytes(rng, 2*4*direct.ChunkSize+5000) // two full rows and a short one
	const row = 1
	at := int64(row*direct.ChunkSize + 4242) // offset in each shard's bytes
	for _, tc := range []struct {
		name   string
		shards []int
		ok     bool
	}{
		{"one data shard", []int{2}, true},
		{"two data shards", []int{0, 3}, true},
		{"data and parity", []int{1, 5}, true},
		{"parity only", []int{4}, true},
		{"three shards", []int{0, 1, 4}, false},
		{"three data shards", []int{0, 1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "ec/" + tc.name
			rec, err := c.Put(ctx, key, data, ec)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.shards {
				if err := c.Corrupt(ctx, key, s, at, 2); err != nil {
					t.Fatal(err)
				}
			}
			got, report, err := c.GetWithReport(ctx, key, client.ModeDirect)
			if !tc.ok {
				if tc.shards[2] < direct.DataShards {
					if !base.IsDataLoss(err) || got != nil {
						t.Fatalf("want data loss, got %d bytes, %v", len(got), err)
					}
					return
				}
				// Two data shards and one parity bad: a read that needs
				// parity hits the third; the scrub must fail either way.
				if _, err := c.ScrubObject(ctx, rec, nil, nil); !base.IsDataLoss(err) {
					t.Fatalf("scrub of 3 bad shards: %v", err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read: %v (%s)", err, report)
			}
			// Reads repair the shards they read; the scrub reads parity too.
			if _, err := c.ScrubObject(ctx, rec, nil, nil); err != nil {
				t.Fatal(err)
			}
			storeIsClean(t, cl, rec, row)
			if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after repair: %v", err)
			}
		})
	}
}

func TestKilledNodeDoesNotStopReadsOrWrites(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 7, devcluster.Options{})
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := 0; i < 40; i++ {
		key := "k/" + string(rune('a'+i%26)) + string(rune('0'+i/26))
		objs[key] = randomBytes(rng, rng.Intn(300<<10))
		red := rep
		if i%2 == 1 {
			red = ec
		}
		if _, err := c.Put(ctx, key, objs[key], red); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.KillNode(2); err != nil {
		t.Fatal(err)
	}
	// Right away (the lease has not expired) and after it expires.
	for round := 0; round < 2; round++ {
		for key, want := range objs {
			got, err := c.Get(ctx, key)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d: get %s: %v", round, key, err)
			}
		}
		for i := 0; i < 10; i++ {
			key := "new/" + string(rune('a'+i)) + string(rune('0'+round))
			data := randomBytes(rng, rng.Intn(200<<10))
			red := rep
			if i%2 == 1 {
				red = ec
			}
			rec, err := c.Put(ctx, key, data, red)
			if err != nil {
				t.Fatalf("round %d: put %s: %v", round, key, err)
			}
			for _, id := range rec.Placement {
				if id == 3 {
					t.Fatalf("placed on the dead node: %v", rec.Placement)
				}
			}
			objs[key] = data
		}
		waitDown(t, c, 3)
	}
	// Substituted placements are in the mapping table.
	entries, err := cl.Coord.Mapping().List(ctx, "new/", 100)
	if err != nil || len(entries) == 0 {
		t.Fatalf("mapping table: %d entries, %v", len(entries), err)
	}
	// The node comes back with its data.
	if err := cl.StartNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for key, want := range objs {
		if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after restart: get %s: %v", key, err)
		}
	}
}

// waitDown waits until the coordinator no longer sees node id as live.
func waitDown(t *testing.T, c *client.Client, id uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		nodes, err := c.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Id == id && !n.Live {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node %d still live", id)
}

// TestMissingFilesAreDamage: a chunk file, a sums file or a whole blob
// (chunks, sums and local index entry, as on a node whose store was
// reformatted) missing on a node is damage: reads and the scrubber re-create
// it from the other replicas or shards, count it, and the node's local index
// names the blob again.
func TestMissingFilesAreDamage(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	cl, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	for _, red := range []objectpb.Redundancy{rep, ec} {
		t.Run(red.String(), func(t *testing.T) {
			data := randomBytes(rng, 9*direct.ChunkSize+100)
			key := "missing/" + red.String()
			rec, err := c.Put(ctx, key, data, red)
			if err != nil {
				t.Fatal(err)
			}
			l := len(rec.Placement)
			shardOf := func(r int) uint32 {
				if red == ec {
					return uint32(r)
				}
				return 0
			}
			chunks := 0
			for i := 0; ; i++ {
				cid := direct.ChunkID{Object: rec.Object, Version: rec.Version, Index: uint32(i)}
				if _, err := cl.Node(int(rec.Placement[0] - 1)).Chunks().ReadChunk(cid); err != nil {
					break
				}
				chunks++
			}
			// Replica 0: chunk 1's data file deleted. Replica 1: the whole
			// blob deleted (every chunk, sums file and index entry).
			n0 := cl.Node(int(rec.Placement[0] - 1))
			if err := n0.Chunks().Store().Delete(objstore.DataName(direct.ChunkID{Object: rec.Object, Version: rec.Version, Shard: shardOf(0), Index: 1})); err != nil {
				t.Fatal(err)
			}
			n1 := cl.Node(int(rec.Placement[1] - 1))
			if err := n1.Chunks().DeleteBlob(rec.Object, rec.Version); err != nil {
				t.Fatal(err)
			}
			got, err := c.Get(ctx, key)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read with missing files: %v", err)
			}
			report, err := c.ScrubObject(ctx, rec, nil, nil)
			if err != nil {
				t.Fatalf("scrub: %v (%s)", err, report)
			}
			// The read may have re-created some already; the scrub must
			// leave every chunk present and verified.
			for i := 0; i < chunks; i++ {
				storeIsClean(t, cl, rec, i)
			}
			if s := n1.Chunks().Stats(); s.MissingRepaired < int64(chunks) {
				t.Fatalf("node %d re-created %d missing chunks, want %d", rec.Placement[1], s.MissingRepaired, chunks)
			}
			blobs, err := n1.Chunks().Blobs()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, b := range blobs {
				if b.Object == rec.Object && b.Version == rec.Version {
					found = true
					if b.Shard != shardOf(1) || b.SizeBytes != rec.SizeBytes || len(b.Placement) != l || b.Key != key {
						t.Fatalf("re-created index entry %+v for %v", b, rec)
					}
				}
			}
			if !found {
				t.Fatalf("node %d: no local index entry for the re-created blob", rec.Placement[1])
			}
			// A second scrub finds nothing to do.
			report, err = c.ScrubObject(ctx, rec, nil, nil)
			if err != nil || report.Repaired != 0 {
				t.Fatalf("second scrub: %v (%s)", err, report)
			}
		})
	}
}
