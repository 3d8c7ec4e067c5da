package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// TestKVOnFlashDieFailure: nodes on emulated flash keep their KV replicas
// on the same device; a die of one node that holds KV tables fails; the
// node identifies the KV files the die held and scrubs those shards, the
// lost blocks are patched from the other replicas through the raft log,
// every key reads back, and the replicas compare equal, with no rebuild.
func TestKVOnFlashDieFailure(t *testing.T) {
	// The deadline bounds a hang (the waits below have their own); it
	// times nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	co, err := coord.Start(ctx, coord.Config{Dir: t.TempDir(), LeaseTTLSeconds: 2, UnsafeNoFsync: true, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	kvOpts := &kv.Options{CacheBytes: -1}
	g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 32, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
	var nodes []*Node
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	var dirs []string
	for i := 0; i < 3; i++ {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		st, err := objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: int64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		n, err := Start(ctx, Config{Dir: dir, Store: st, CoordinatorAddr: co.Addr(), NodeID: base.NodeID(i + 1),
			HeartbeatInterval: 100 * time.Millisecond, KV: kvOpts, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	resp, err := co.KVLayout(ctx, &coordpb.KVLayoutRequest{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	layout, err := kvapi.LayoutFromProto(resp.Layout)
	if err != nil {
		t.Fatal(err)
	}
	shard := layout.Shards[0].ID
	addrs := map[base.NodeID]string{}
	for _, n := range nodes {
		waitUntil(t, fmt.Sprintf("%s opens its replicas", n.ID()), 30*time.Second, func() bool { return n.KV() != nil })
		addrs[n.ID()] = n.Addr()
		// The replicas on the flash device have space kept for them
		// from object writes (TestSharedHeadroomKeptForKV).
		per, err := kvPerReplica(*kvOpts)
		if err != nil {
			t.Fatal(err)
		}
		most := base.Bytes(len(n.KV().Replicas())) * per
		if h := n.kvHeadroom(per); h <= 0 || h > most {
			t.Fatalf("%s keeps %s for its KV replicas, want (0, %s]", n.ID(), h, most)
		}
	}
	cl, err := kvclient.New(layout, addrs, kvclient.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const keys = 1500
	value := func(i int) string { return fmt.Sprintf("value-%05d-%0200d", i, i) }
	for i := 0; i < keys; i++ {
		put(ctx, t, cl, fmt.Sprintf("key-%05d", i), value(i))
	}
	waitUntil(t, "replicas caught up", 60*time.Second, func() bool {
		want := nodes[0].KV().Replica(shard).AppliedIndex()
		for _, n := range nodes {
			if a := n.KV().Replica(shard).AppliedIndex(); a != want {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		if err := n.KV().Replica(shard).Compact(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The die of node 1 that holds the most of its KV tables' primary
	// pages (a die that holds only a table's copy loses nothing a read
	// needs: its copy is re-placed, no corruption to detect).
	victim := nodes[0]
	st := victim.inner.(*objstore.SDFStore)
	victim.kv.mu.Lock()
	vfs := victim.kv.flashFS
	victim.kv.mu.Unlock()
	var die flash.DieAddr
	bestTables := 0
	for ch := 0; ch < g.Channels; ch++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			loss, err := st.LostOnDie(flash.DieAddr{Channel: ch, Die: d}, reparo.IdentifyCDRStar)
			if err != nil {
				t.Fatal(err)
			}
			tables := 0
			for _, f := range loss.OtherFiles {
				if !strings.HasPrefix(f, kvFlashDir+"/") || !strings.HasSuffix(f, ".sst") || strings.Contains(f, "/.guardfs/") {
					continue
				}
				pl, err := vfs.Placement(f)
				if err == nil && slices.Contains(pl.PrimaryChannels, ch) && !slices.Contains(pl.CopyChannels, ch) {
					tables++
				}
			}
			if tables > bestTables {
				die, bestTables = flash.DieAddr{Channel: ch, Die: d}, tables
			}
		}
	}
	if bestTables == 0 {
		t.Fatal("no die of node 1 holds a KV table: the test proves nothing")
	}
	// Where each table and its copies are (for a failure's reader).
	for _, name := range st.FS().List() {
		if strings.HasSuffix(name, ".sst") && !strings.HasPrefix(name, ".sdfvfs/") {
			pl, err := vfs.Placement(name)
			t.Logf("%s: %v %v", name, pl, err)
		}
	}
	r := victim.KV().Replica(shard)
	before := r.Stats()
	if err := st.FailDie(die.Channel*g.DiesPerChannel + die.Die); err != nil {
		t.Fatal(err)
	}
	t.Logf("failed die %s of node 1 (%d KV tables there)", die, bestTables)
	waitUntil(t, "node 1 detects the lost KV blocks", 60*time.Second, func() bool {
		return r.Stats().CorruptionsDetected > before.CorruptionsDetected
	})
	waitUntil(t, "node 1's replica repaired", 90*time.Second, func() bool {
		st, err := r.Status()
		return err == nil && st.State == "healthy" && st.PendingRepairs == 0
	})
	for i := 0; i < keys; i++ {
		v, found, err := cl.Get(ctx, []byte(fmt.Sprintf("key-%05d", i)), kvclient.Strong())
		if err != nil || !found || string(v) != value(i) {
			t.Fatalf("key %d: %q %v %v", i, v, found, err)
		}
	}
	waitUntil(t, "replicas equal", 60*time.Second, func() bool {
		var sums []uint32
		for i, n := range nodes {
			r := n.KV().Replica(shard)
			if r == nil {
				return false
			}
			crc, _, _, err := r.ContentChecksum()
			if err != nil {
				if time.Now().Unix()%10 == 0 {
					t.Logf("node %d's replica: content checksum: %v", i+1, err)
				}
				return false
			}
			sums = append(sums, crc)
		}
		return sums[0] == sums[1] && sums[1] == sums[2]
	})
	after := r.Stats()
	t.Logf("node 1's replica: %v", after)
	if after.Rebuilds != before.Rebuilds {
		t.Fatalf("the replica was rebuilt: %v", after)
	}
	if after.PatchesApplied == before.PatchesApplied && after.BlocksMerged == before.BlocksMerged {
		t.Fatalf("nothing patched: %v", after)
	}
	// Once repaired, the replica's sstables and raft log keep nothing on
	// the dead die: their ranges there are retired off it.
	onDie := func() (names []string) {
		loss, err := st.LostOnDie(die, reparo.IdentifyCDRStar)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range loss.OtherFiles {
			if id, ok := kvShardOfFile(f); ok && id == shard && !strings.HasPrefix(f, ".sdfvfs/") &&
				(strings.HasSuffix(f, ".sst") || strings.Contains(f, "/raft/")) {
				names = append(names, f)
			}
		}
		return names
	}
	waitUntil(t, "the replica's sstable and raft log ranges retired off the die", 60*time.Second, func() bool { return len(onDie()) == 0 })
	// And so are the files sdfvfs keeps two copies of (the MANIFEST,
	// OPTIONS, markers, their shadows, the sstables' range copies): each
	// rewritten from its other copy, not left for a read to find.
	copiesOnDie := func() (names []string) {
		loss, err := st.LostOnDie(die, reparo.IdentifyCDRStar)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range loss.OtherFiles {
			if id, ok := kvShardOfFile(f); ok && id == shard && !strings.Contains(f, ".guardfs/") &&
				(strings.HasPrefix(f, ".sdfvfs/") || sdfvfs.DefaultDuplicateFile(f)) {
				names = append(names, f)
			}
		}
		return names
	}
	waitUntil(t, "Pebble's copied files retired off the die", 60*time.Second, func() bool { return len(copiesOnDie()) == 0 })
	if loss, err := st.LostOnDie(die, reparo.IdentifyCDRStar); err == nil {
		t.Logf("left on the die after the repair: %d ranges in %v", loss.Ranges, loss.OtherFiles)
	}
	// The retired ranges are refused by the layers that own them: node 1
	// restarts on its device (the die still dead), its replica opens
	// without a rebuild and holds what the others hold.
	if err := victim.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := objstore.OpenSDFStore(filepath.Join(dirs[0], "sdf"), objstore.SDFStoreOptions{Geometry: g, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	n1, err := Start(ctx, Config{Dir: dirs[0], Store: st2, CoordinatorAddr: co.Addr(), NodeID: 1,
		HeartbeatInterval: 100 * time.Millisecond, KV: kvOpts, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	nodes[0] = n1
	waitUntil(t, "node 1 reopens its replica", 60*time.Second, func() bool { return n1.KV() != nil && n1.KV().Replica(shard) != nil })
	r1 := n1.KV().Replica(shard)
	var logged time.Time
	every := func() bool { // a log line every 5 s, not one per poll
		if time.Since(logged) < 5*time.Second {
			return false
		}
		logged = time.Now()
		return true
	}
	waitUntil(t, "replicas equal after node 1's restart", 3*time.Minute, func() bool {
		var sums []uint32
		for i, n := range nodes {
			if fails := n.KV().Failures(); len(fails) > 0 {
				t.Fatalf("node %d's replica failed after node 1's restart: %v", i+1, fails)
			}
			r := n.KV().Replica(shard)
			if r == nil {
				return false
			}
			crc, _, _, err := r.ContentChecksum()
			if err != nil {
				if every() {
					t.Logf("node %d's replica: content checksum: %v", i+1, err)
				}
				return false
			}
			sums = append(sums, crc)
		}
		ok := r1.RepairsPending() == 0 && sums[0] == sums[1] && sums[1] == sums[2]
		if !ok && every() {
			st, err := r1.Status()
			t.Logf("node 1's replica: %v %v; sums %v", st, err, sums)
		}
		return ok
	})
	if st := r1.Stats(); st.Rebuilds != 0 {
		t.Fatalf("node 1's replica was rebuilt after its restart: %v", st)
	}
	if fails := n1.KV().Failures(); len(fails) > 0 {
		t.Fatalf("node 1's replica failed to open and was replaced: %v", fails)
	}
	t.Logf("node 1's replica after its restart: %v", r1.Stats())
}
