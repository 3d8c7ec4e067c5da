package kv_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
	"github.com/flashmend/flashmend/internal/sdf"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// flashGeometry is a 64 MiB emulated device per node.
func flashGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 32, PageSize: 4096, OOBSize: 128}
}

// pageOf finds the flash page holding byte off of the file at path on an
// sdfvfs, by matching page content inside the zones the file maps.
func pageOf(t *testing.T, dev *flash.Emulator, fs *sdfvfs.FS, path string, off int64) flash.PageAddr {
	t.Helper()
	g := dev.Geometry()
	ps := int64(g.PageSize)
	st, err := fs.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, min(ps, st.Size()-off/ps*ps))
	_, err = f.ReadAt(want, off/ps*ps)
	f.Close()
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	pl, err := fs.Placement(path)
	if err != nil {
		t.Fatal(err)
	}
	data, oob := make([]byte, ps), make([]byte, g.OOBSize)
	for _, z := range pl.PrimaryZones {
		ch, blk := z%g.Channels, z/g.Channels
		for d := 0; d < g.DiesPerChannel; d++ {
			for pg := 0; pg < g.PagesPerBlock; pg++ {
				a := flash.PageAddr{Channel: ch, Die: d, Block: blk, Page: pg}
				if _, err := dev.Read(a, data, oob); err != nil {
					continue
				}
				if bytes.Equal(data[:len(want)], want) {
					return a
				}
			}
		}
	}
	t.Fatalf("no flash page holds offset %d of %s", off, path)
	return flash.PageAddr{}
}

// TestRepairOnEmulatedFlash runs the replicas on internal/sdfvfs over
// emulated flash (sstable metadata blocks duplicated by sdfvfs), flips a
// persistent bit in the flash page under one sstable data block of a
// follower, and checks that the damage is repaired through the log.
func TestRepairOnEmulatedFlash(t *testing.T) {
	devs := map[base.NodeID]*flash.Emulator{}
	fss := map[base.NodeID]*sdfvfs.FS{}
	c, err := kvcluster.Start(kvcluster.Config{
		Options: kv.Options{CacheBytes: -1, MemTableBytes: 1 << 20},
		NodeFS: func(id base.NodeID) (vfs.FS, error) {
			dev, err := flash.NewMemory(flashGeometry(), flash.Options{Seed: int64(id)})
			if err != nil {
				return nil, err
			}
			sfs, err := sdf.Format(dev, sdf.Options{})
			if err != nil {
				return nil, err
			}
			fs, err := sdfvfs.New(sfs, sdfvfs.Options{MetadataRanges: sdfvfs.SSTMetadataRanges(engine.SSTReaderOptions())})
			if err != nil {
				return nil, err
			}
			devs[id], fss[id] = dev, fs
			return fs, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := c.NewClient(kvclient.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	loadKeys(t, cl, 3000)
	victimNode := leader%3 + 1
	victim := c.Node(victimNode).Replica(1)
	// Every replica, not only the victim: the client's eventual scan below
	// may be served by the third, and one still behind returned fewer rows
	// (2900, 0 of 3000 in make stress).
	waitAllCaughtUp(t, c, 1)
	if err := victim.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	// Find the data block of the target key in the one sstable, as the
	// corruption tool does, but damage it in flash instead of in the file.
	target := testKey(1500)
	path := sstableHolding(t, victim, target)
	st, err := fss[victimNode].Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The middle of the file is data blocks (metadata sits at the end).
	page := pageOf(t, devs[victimNode], fss[victimNode], path, st.Size()/2)
	devs[victimNode].Faults().FlipBit(page, 1000, true)
	t.Logf("flipped a persistent bit in flash page %v under %s (%d bytes)", page, path, st.Size())

	// Reads of every key through the client stay correct; the victim's own
	// scan runs into the damage.
	_, _, _, err = victim.Scan(ctx, nil, nil, 0, 0, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	if !base.IsCorruption(err) {
		t.Fatalf("scan of the damaged replica: %v", err)
	}
	rows, err := cl.Scan(ctx, nil, nil, 0, kvclient.Eventual())
	if err != nil || len(rows) != 3000 {
		t.Fatalf("client scan: %d rows, %v", len(rows), err)
	}
	waitFor(t, "patch", func() bool { return victim.Stats().PatchesApplied > 0 })
	t.Logf("victim: %v, repair took %v", victim.Stats(), victim.Stats().LastRepair)
	if victim.Stats().Rebuilds != 0 {
		t.Fatal("rebuilt instead of patched")
	}
	assertSame(t, checksums(t, c, 1))

	t.Logf("sdfvfs: %v", fss[victimNode].Stats())
}

// sstableHolding returns the path of the sstable whose bounds hold key.
func sstableHolding(t *testing.T, r *kv.Replica, key []byte) string {
	t.Helper()
	sm, unlock := r.LockSM()
	levels, err := sm.DB().SSTables()
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range levels {
		for _, tbl := range level {
			if bytes.Compare(engine.UserKey(key), tbl.Smallest.UserKey) >= 0 && bytes.Compare(engine.UserKey(key), tbl.Largest.UserKey) <= 0 {
				fs, dir := r.Files()
				return fs.PathJoin(dir, "pebble", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
			}
		}
	}
	t.Fatalf("no sstable holds %q", key)
	return ""
}
