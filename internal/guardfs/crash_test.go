package guardfs_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

// TestCrashConsistency runs Pebble on guardfs over a crashable MemFS and
// takes crash images at random points of a workload of flushes,
// compactions and manifest rotations; each image keeps what was synced and
// a random part of what was not (so guardfs's Create, Rename and Remove
// are cut at every step). Every image must open, hold every key flushed
// before the crash with its value, and nothing wrong.
func TestCrashConsistency(t *testing.T) {
	const seed, batches, perBatch = 9, 12, 100
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	mem := vfs.NewCrashableMem()
	g := newGuard(t, mem, guardfs.Options{})
	db, err := pebble.Open("/db", guardtest.PebbleOptions(t, g))
	if err != nil {
		t.Fatal(err)
	}
	type image struct {
		fs      *vfs.MemFS
		durable int // keys [0, durable) were flushed before the crash
		pct     int
	}
	var images []image
	crash := func(durable int) {
		pct := rng.IntN(101)
		images = append(images, image{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng}), durable: durable, pct: pct})
	}
	written := 0
	for b := 0; b < batches; b++ {
		for i := 0; i < perBatch; i++ {
			if err := db.Set([]byte(guardtest.KeyOf(written)), guardtest.ValueOf(written, 1), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			written++
		}
		crash(written - perBatch)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		crash(written)
		if b%4 == 3 {
			if err := db.Compact(context.Background(), []byte(guardtest.KeyOf(0)), []byte(guardtest.KeyOf(written)), false); err != nil {
				t.Fatal(err)
			}
			crash(written)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	crash(written)
	for i, im := range images {
		gi := newGuard(t, im.fs, guardfs.Options{})
		d, err := pebble.Open("/db", guardtest.PebbleOptions(t, gi))
		if err != nil {
			t.Fatalf("image %d (%d%% of unsynced data): open: %v", i, im.pct, err)
		}
		for k := 0; k < written; k++ {
			v, c, err := d.Get([]byte(guardtest.KeyOf(k)))
			switch {
			case err == nil:
				ok := bytes.Equal(v, guardtest.ValueOf(k, 1))
				c.Close()
				if !ok {
					t.Fatalf("image %d: key %d: wrong value", i, k)
				}
			case errors.Is(err, pebble.ErrNotFound):
				if k < im.durable {
					t.Fatalf("image %d (%d%% of unsynced data): key %d flushed before the crash is missing", i, im.pct, k)
				}
			default:
				t.Fatalf("image %d: key %d: %v", i, k, err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d crash images open with every flushed key", len(images))
}

// TestMkdirAllIsDurable: the directories MkdirAll creates survive a power
// loss that keeps nothing unsynced (their parents are synced), as does a
// file created and synced in the deepest one. Without it a KV replica's
// directory could vanish with every acknowledged write in it
// (internal/kv TestPowerLossKeepsAcknowledgedWrites).
func TestMkdirAllIsDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	g := newGuard(t, mem, guardfs.Options{})
	if err := g.MkdirAll("kv/n1/shard-1/raft", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := g.Create("kv/n1/shard-1/raft/log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("entry")); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	d, err := g.OpenDir("kv/n1/shard-1/raft")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		t.Fatal(err)
	}
	// MkdirAll of what exists changes nothing and syncs nothing new.
	if err := g.MkdirAll("kv/n1", 0o755); err != nil {
		t.Fatal(err)
	}
	after := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	for _, dir := range []string{"kv", "kv/n1", "kv/n1/shard-1", "kv/n1/shard-1/raft"} {
		if st, err := after.Stat(dir); err != nil || !st.IsDir() {
			t.Fatalf("%s after a power loss: %v", dir, err)
		}
	}
	if st, err := after.Stat("kv/n1/shard-1/raft/log"); err != nil || st.Size() != 5 {
		t.Fatalf("synced file after a power loss: %v", err)
	}
}
