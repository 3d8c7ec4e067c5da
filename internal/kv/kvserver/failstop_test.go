package kvserver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/torture/faultfs"
)

func key(i int) []byte   { return []byte(fmt.Sprintf("key-%05d", i)) }
func value(i int) []byte { return []byte(fmt.Sprintf("value-%05d-%0200d", i, i)) }

// TestWriteErrorOnManifestFailStopsReplica is the regression test of the
// torture harness's KV CORDS cells "pebble MANIFEST / write error" and
// "pebble marker / write error": Pebble's Logger.Fatalf on a failed
// MANIFEST write panicked and took every in-process node down. Now the
// replica whose engine failed fail-stops (a clear error for its reads and
// writes), the process and the other nodes go on serving, and once the
// device takes writes again a fresh replica replaces it and rebuilds from
// its peers: every key reads back from it.
func TestWriteErrorOnManifestFailStopsReplica(t *testing.T) {
	failStopAndReplace(t, "MANIFEST",
		func(p string) bool { return strings.Contains(p, "MANIFEST") },
		func(ctx context.Context, old *kv.Replica, _ *kvclient.Client) {
			// A compaction flushes the memtable: its MANIFEST edit fails.
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_ = old.Compact(cctx)
			ccancel()
		},
		func(err error) bool { return errors.Is(err, engine.ErrEngineFailed) })
}

// TestDirSyncErrorFailStopsReplica: the torture harness's nemesis on
// flash (seed 1795570229166824762) filled a node's device; a replica
// fail-stopped, and the fresh replica opened in its place hit a directory
// sync the full device refused while Pebble moved its format marker:
// pebble.Open panicked and the node's process died. Now the failed sync
// fails the engine, the replica fail-stops, its replacement keeps retrying
// (failing the same way, without a panic) while the fault lasts, and
// takes its place once the device takes writes again.
func TestDirSyncErrorFailStopsReplica(t *testing.T) {
	failStopAndReplace(t, "sync directory",
		func(p string) bool { return strings.HasSuffix(p, "/pebble") },
		func(ctx context.Context, old *kv.Replica, _ *kvclient.Client) {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_ = old.Compact(cctx)
			ccancel()
		},
		func(err error) bool { return errors.Is(err, engine.ErrEngineFailed) })
}

// TestWriteErrorOnRaftLogFailStopsReplica: found by the crash-point sweep on
// small flash devices, where a replica's raft log sync failed with "no
// space": the replica's raft loop ended and it stayed out, silently, until
// the node restarted (two such replicas of a shard lost its quorum for
// good). Now a raft log the device refuses fail-stops the replica like an
// engine failure: it says why, the others serve, and a fresh replica
// replaces it once the device takes writes.
func TestWriteErrorOnRaftLogFailStopsReplica(t *testing.T) {
	failStopAndReplace(t, "raft log",
		func(p string) bool { return strings.Contains(p, "/raft/") },
		func(ctx context.Context, _ *kv.Replica, cl *kvclient.Client) {
			// Writes make every replica append to its raft log.
			for i := 0; i < 5; i++ {
				wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
				_, _ = cl.Put(wctx, []byte(fmt.Sprintf("trigger-%d", i)), []byte("x"))
				wcancel()
			}
		},
		func(err error) bool { return strings.Contains(err.Error(), "raft log") })
}

// failStopAndReplace runs a 3-node cluster, fails the writes of node 1's
// files that match, makes node 1's replica write them (trigger), and
// checks that the replica fail-stops with an error naming what (isFailure
// holds for it), refuses reads and writes saying so, that the process and
// the other replicas go on, and that once the writes succeed again a fresh
// replica takes its place and holds every key.
func failStopAndReplace(t *testing.T, what string, match func(p string) bool,
	trigger func(ctx context.Context, old *kv.Replica, cl *kvclient.Client), isFailure func(error) bool) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx, 1); err != nil {
		t.Fatal(err)
	}
	n := 0
	putKeys := func(count int) {
		t.Helper()
		for end := n + count; n < end; n++ {
			// A put is tried again until the test's deadline: on a loaded
			// machine one may outlast the server's proposal timeout (the
			// same value again is the same write).
			for {
				_, err := cl.Put(ctx, key(n), value(n))
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("put %d: %v", n, err)
				}
				t.Logf("put %d: %v (trying again)", n, err)
			}
		}
	}
	putKeys(200)

	n1 := c.Node(1)
	old := n1.Replica(1)
	victim := "kv/n1/"
	ffs.Set(&faultfs.Rule{Kind: faultfs.WriteError, Match: func(p string) bool {
		return strings.HasPrefix(p, victim) && match(p)
	}})
	trigger(ctx, old, cl)
	waitFor(t, 30*time.Second, "n1's replica fail-stops", func() bool { return old.Failed() != nil })
	if ffs.Injected() == 0 {
		t.Fatal("the fault never fired")
	}
	if err := old.Failed(); !isFailure(err) || !strings.Contains(err.Error(), what) {
		t.Fatalf("failure %v does not say the %s failed", err, what)
	}
	_, _, _, err = old.Get(ctx, key(0), &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	var kerr *kvapi.Error
	if !errors.As(err, &kerr) || kerr.Reason != kvpb.ErrorDetail_REPLICA_UNAVAILABLE {
		t.Fatalf("read from the fail-stopped replica: %v, want REPLICA_UNAVAILABLE", err)
	}
	if _, err := old.Write(ctx, &kvpb.WriteBatch{Ops: []*kvpb.Op{{Kind: kvpb.Op_PUT, Key: key(0), Value: value(0)}}}); err == nil {
		t.Fatal("a write through the fail-stopped replica succeeded")
	}
	// The process is alive and the other two replicas keep the shard.
	putKeys(50)
	// A fresh replica tries to open under the fault (and fails, without
	// taking the process down) before the fault clears.
	atStop := ffs.Injected()
	waitFor(t, 30*time.Second, "the replacement tries to open under the fault", func() bool { return ffs.Injected() > atStop })
	putKeys(10)

	// The device takes writes again: a fresh replica takes n1's place and
	// rebuilds from its peers.
	ffs.Set(nil)
	eventual := &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL}
	waitFor(t, 60*time.Second, "a fresh replica on n1 serves every key", func() bool {
		r := n1.Replica(1)
		if r == nil || r == old {
			return false
		}
		for i := 0; i < n; i++ {
			v, found, _, err := r.Get(ctx, key(i), eventual)
			if err != nil || !found {
				return false
			}
			if string(v) != string(value(i)) {
				t.Fatalf("key %d reads back %q from the replacement", i, v)
			}
		}
		return true
	})
	fails := n1.Failures()
	if len(fails) != 1 || !fails[0].Replaced || !strings.Contains(fails[0].String(), what) {
		t.Fatalf("n1's failures: %v, want one replica replaced after its %s write failed", fails, what)
	}
	t.Logf("n1: %v", fails[0])
	// Writes reach the replacement too.
	putKeys(20)
	waitFor(t, 30*time.Second, "the replacement applies new writes", func() bool {
		v, found, _, err := n1.Replica(1).Get(ctx, key(n-1), eventual)
		return err == nil && found && string(v) == string(value(n-1))
	})
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
