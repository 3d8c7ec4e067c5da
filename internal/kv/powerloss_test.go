package kv_test

import (
	"context"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestPowerLossKeepsAcknowledgedWrites: every node of a 3-replica cluster
// (two shards) loses power at once, while clients write, several times in
// a row. A power loss is not a process crash: what was written but not
// synced may be lost, or survive in part, block by block and directory
// entry by directory entry (Pebble's crashable MemFS: CrashClone keeps
// every synced byte and a seeded fraction of the rest, drawn anew for each
// loss from 0 to 100%). The cluster restarts from the clone; every write
// acknowledged before the power went reads back (strong reads) with its
// value, and the replicas of each shard agree. The seed is printed.
func TestPowerLossKeepsAcknowledgedWrites(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	fs := vfs.NewCrashableMem()
	acked := map[string]string{} // every write acknowledged before a power loss
	const losses = 3
	for round := 0; round <= losses; round++ {
		c, err := kvcluster.Start(kvcluster.Config{FS: fs, Dir: "kv", Splits: []string{"m"}, Options: kv.Options{CacheBytes: -1}})
		if err != nil {
			t.Fatalf("round %d: start after the power loss: %v", round, err)
		}
		cl, err := c.NewClient(kvclient.Options{Seed: seed + int64(round)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		for _, s := range []base.ShardID{1, 2} {
			if _, err := c.WaitLeader(ctx, s); err != nil {
				t.Fatalf("round %d: shard %d: %v", round, s, err)
			}
		}
		var lost []string
		for k, v := range acked {
			got, found, err := cl.Get(ctx, []byte(k))
			if err != nil || !found || string(got) != v {
				lost = append(lost, fmt.Sprintf("%s (found=%v err=%v)", k, found, err))
			}
		}
		if len(lost) > 0 {
			sort.Strings(lost)
			t.Fatalf("round %d: %d of %d writes acknowledged before a power loss are gone: %v", round, len(lost), len(acked), lost[:min(len(lost), 20)])
		}
		if round == losses {
			for _, s := range []base.ShardID{1, 2} {
				waitAllCaughtUp(t, c, s)
				assertSame(t, checksums(t, c, s))
			}
			cancel()
			cl.Close()
			c.Close()
			t.Logf("%d acknowledged writes kept through %d power losses", len(acked), losses)
			return
		}
		// Writers put new keys (on both shards) until the power goes.
		var mu sync.Mutex
		now := map[string]string{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					prefix := "a"
					if (w+i)%2 == 1 {
						prefix = "z"
					}
					k := fmt.Sprintf("%s-%d-%d-%05d", prefix, round, w, i)
					v := fmt.Sprintf("v-%s-%0100d", k, i)
					wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := cl.Put(wctx, []byte(k), []byte(v))
					wcancel()
					if err == nil {
						mu.Lock()
						now[k] = v
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+rng.Intn(1300)) * time.Millisecond)
		// The power goes: what was acknowledged until now must survive.
		mu.Lock()
		for k, v := range now {
			acked[k] = v
		}
		mu.Unlock()
		keep := rng.Intn(101)
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: randv2.New(randv2.NewPCG(rng.Uint64(), rng.Uint64()))})
		if testing.Verbose() {
			logLoss(t, fs, clone)
		}
		close(stop)
		wg.Wait()
		cancel()
		cl.Close()
		c.Close() // its files are the ones the power loss left behind: dropped
		t.Logf("power loss %d: %d writes acknowledged so far, %d%% of unsynced data kept", round+1, len(acked), keep)
		fs = clone
	}
}

// logLoss says which files of before a power loss left shorter or took
// (the first 20), for the reader of a failure.
func logLoss(t *testing.T, before, after vfs.FS) {
	files, err := bitrot.Files(before, "kv")
	if err != nil {
		t.Logf("what the power loss took: %v", err)
		return
	}
	var diff []string
	for _, p := range files {
		was, err := before.Stat(p)
		if err != nil {
			continue
		}
		if now, err := after.Stat(p); err != nil {
			diff = append(diff, p+" gone")
		} else if now.Size() != was.Size() {
			diff = append(diff, fmt.Sprintf("%s %d -> %d bytes", p, was.Size(), now.Size()))
		}
	}
	t.Logf("what the power loss took: %v", diff[:min(len(diff), 20)])
}
