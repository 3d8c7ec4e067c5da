package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestCoordinatorStoreLost: the coordinator's whole directory is deleted (or
// its etcd WAL truncated, which etcd alone would wait on forever): the
// cluster comes back with every object readable at its latest version, the
// deleted key stays deleted, and new writes get versions above the old ones.
func TestCoordinatorStoreLost(t *testing.T) {
	for _, damage := range []string{"deleted", "wal-truncated"} {
		t.Run(damage, func(t *testing.T) {
			seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
			rng := rand.New(rand.NewSource(seed))
			ctx := context.Background()
			opts := devcluster.Options{Dir: t.TempDir(), Nodes: 6, UnsafeNoFsync: true}
			cl, err := devcluster.Start(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.Dial(ctx, cl.Endpoint(), client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]byte{}
			var maxVersion uint64
			for i := 0; i < 10; i++ {
				red := rep
				if i%3 == 2 {
					red = ec
				}
				key := fmt.Sprintf("lost/%d", i)
				data := randomBytes(rng, rng.Intn(5*direct.ChunkSize))
				rec, err := c.Put(ctx, key, data, red)
				if err != nil {
					t.Fatal(err)
				}
				want[key] = data
				maxVersion = max(maxVersion, rec.Version)
			}
			// An empty object (no chunk, only index entries on the nodes).
			if _, err := c.Put(ctx, "lost/empty", nil, rep); err != nil {
				t.Fatal(err)
			}
			want["lost/empty"] = []byte{}
			// An overwrite and a delete, both collected before the loss.
			want["lost/0"] = randomBytes(rng, 1000)
			if _, err := c.Put(ctx, "lost/0", want["lost/0"], rep); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, "lost/1"); err != nil {
				t.Fatal(err)
			}
			delete(want, "lost/1")
			waitFor(t, "the old versions to be collected", func() bool {
				return cl.Coord.Sweep(ctx) == nil && garbageEmpty(t, cl)
			})
			c.Close()
			if err := cl.Close(); err != nil {
				t.Fatal(err)
			}
			coordDir := filepath.Join(opts.Dir, "coordinator")
			switch damage {
			case "deleted":
				if err := os.RemoveAll(coordDir); err != nil {
					t.Fatal(err)
				}
			case "wal-truncated":
				names, _ := filepath.Glob(filepath.Join(coordDir, "etcd", "data", "member", "wal", "*.wal"))
				b, err := os.ReadFile(names[len(names)-1])
				if err != nil {
					t.Fatal(err)
				}
				used := len(b)
				for used > 0 && b[used-1] == 0 {
					used--
				}
				if err := os.WriteFile(names[len(names)-1], b[:used/2], 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs base.LogLines
			opts.Logf = logs.Logf
			start := time.Now()
			cl, err = devcluster.Start(ctx, opts)
			if err != nil {
				t.Fatalf("restart: %v\n%s", err, logs.String())
			}
			defer cl.Close()
			c, err = client.Dial(ctx, cl.Endpoint(), client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			waitFor(t, "every object to be readable again", func() bool {
				for key, data := range want {
					got, err := c.Get(ctx, key)
					if err != nil || !bytes.Equal(got, data) {
						return false
					}
				}
				return true
			})
			t.Logf("every object back %v after the restart", time.Since(start).Round(time.Millisecond))
			if _, err := c.Get(ctx, "lost/1"); !objstore.IsNotFound(err) {
				t.Fatalf("the deleted key: %v", err)
			}
			rec, err := c.Put(ctx, "lost/new", []byte("after"), rep)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Version <= maxVersion {
				t.Fatalf("new version %d not above the old %d", rec.Version, maxVersion)
			}
			if !strings.Contains(logs.String(), "adopting") {
				t.Fatalf("no adoption in the logs:\n%s", logs.String())
			}
		})
	}
}

// garbageEmpty reports whether the coordinator has no garbage left to
// collect (by listing through a rebuild-free path: the sweep's own view).
func garbageEmpty(t *testing.T, cl *devcluster.Cluster) bool {
	t.Helper()
	n, err := cl.Coord.PendingGarbage(context.Background())
	return err == nil && n == 0
}

// TestRebuildIndexOnDemand: a record lost from the index (deleted in etcd
// behind the coordinator's back) comes back with `ctl rebuild-index`
// (client.RebuildIndex); records that are current are kept.
func TestRebuildIndexOnDemand(t *testing.T) {
	cl, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	data := bytes.Repeat([]byte("rebuild"), 20000)
	for _, key := range []string{"idx/a", "idx/b"} {
		if _, err := c.Put(ctx, key, data, rep); err != nil {
			t.Fatal(err)
		}
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: cl.Coord.EtcdEndpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	if _, err := etcd.Delete(ctx, "/flashmend/objects/idx/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "idx/a"); !objstore.IsNotFound(err) {
		t.Fatalf("record deleted: %v", err)
	}
	resp, err := c.RebuildIndex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ObjectsRestored != 1 || resp.ObjectsKept != 1 || resp.NodesAnswered != 6 || len(resp.Errors) != 0 {
		t.Fatalf("rebuild: %v", resp)
	}
	if got, err := c.Get(ctx, "idx/a"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after the rebuild: %v", err)
	}
	// A record damaged in etcd (which keeps no checksums of its own): the
	// read fails with a corruption error, and the coordinator restores the
	// record from the nodes by itself.
	if _, err := etcd.Put(ctx, "/flashmend/objects/idx/b", "not a record"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "idx/b"); !base.IsCorruption(err) {
		t.Fatalf("damaged record: %v", err)
	}
	waitFor(t, "the damaged record to be restored", func() bool {
		got, err := c.Get(ctx, "idx/b")
		return err == nil && bytes.Equal(got, data)
	})
}
