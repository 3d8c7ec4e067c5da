package kv_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
)

// raftSyncFS counts the syncs of raft log files (every copy of every
// generation) on the file system under it.
type raftSyncFS struct {
	vfs.FS
	syncs atomic.Int64
}

type raftSyncFile struct {
	vfs.File
	fs *raftSyncFS
}

func (f raftSyncFile) Sync() error { f.fs.syncs.Add(1); return f.File.Sync() }

func (fs *raftSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.Contains(name, "raftlog-") {
		return f, err
	}
	return raftSyncFile{File: f, fs: fs}, nil
}

func (fs *raftSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *raftSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, o...)
	return fs.wrap(name, f, err)
}

// TestOnePairOfSyncsPerReplicaPerPut: a put costs each of the three
// replicas one write of its raft log, synced in both copies (6 syncs);
// the commit index that moves after it is not synced on its own
// (raftlog.Save). Before, every replica synced both copies a second time
// for the commit (12 syncs per put, on the put's path before it applied).
func TestOnePairOfSyncsPerReplicaPerPut(t *testing.T) {
	fs := &raftSyncFS{FS: vfs.NewMem()}
	c, err := kvcluster.Start(kvcluster.Config{FS: fs, Dir: "kv", Options: kv.Options{CacheBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, s := range c.Layout.Shards {
		if _, err := c.WaitLeader(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := c.NewClient(kvclient.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if _, err := kc.Put(ctx, []byte("warm"), []byte("up")); err != nil {
		t.Fatal(err)
	}
	const puts = 200
	before := fs.syncs.Load()
	for i := range puts {
		if _, err := kc.Put(ctx, []byte(fmt.Sprintf("k%05d", i)), make([]byte, 800)); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(fs.syncs.Load()-before) / puts
	t.Logf("%.2f raft log syncs per put (3 replicas, 2 copies each)", per)
	// 6 per put, and a little more for heartbeats' and elections' writes
	// under a loaded machine; 12 when the commit index is synced alone.
	if per > 8 {
		t.Fatalf("%.2f raft log syncs per put, want about 6 (one synced pair per replica)", per)
	}
}
