package guardfs_test

import (
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
	"github.com/flashmend/flashmend/internal/sdf"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// TestOnAppendOnlyFS runs guardfs over internal/sdfvfs, whose files only
// grow by appending (restores rename a new file into place; sstable
// metadata repairs use its out-of-place WriteAt): the explicit faults of
// TestPebbleExplicitFaults, made through sdfvfs, leave a store that opens
// and reads back.
func TestOnAppendOnlyFS(t *testing.T) {
	const seed = 13
	t.Logf("seed %d", seed)
	for _, c := range explicitCases {
		t.Run(c.name, func(t *testing.T) {
			dev, err := flash.NewMemory(flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 32,
				PageSize: 4096, OOBSize: 128}, flash.Options{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			sfs, err := sdf.Format(dev, sdf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// sdfvfs's own duplication off: guardfs is the protection here.
			vfs, err := sdfvfs.New(sfs, sdfvfs.Options{NoDuplication: true})
			if err != nil {
				t.Fatal(err)
			}
			want := guardtest.BuildStore(t, newGuard(t, vfs, guardfs.Options{}), "db", 1500)
			c.damage(t, vfs, "db", rand.New(rand.NewSource(seed)))
			g := newGuard(t, vfs, guardfs.Options{})
			o := guardtest.ReadBack(t, g, "db", want)
			if !o.Opened || len(o.Bad) > 0 || !c.sst && o.Corrupt > 0 {
				t.Fatalf("%s; guardfs: %s", o, g.Stats())
			}
			if rep, err := g.Verify("db"); err != nil || !c.sst && len(rep.Damage) > 0 {
				t.Fatalf("verify: %s %v", rep, err)
			}
		})
	}
}

// TestRepairOnAppendOnlyFS: sstable metadata damaged on sdfvfs is served
// from the sidecar and rewritten through sdfvfs's out-of-place WriteAt.
func TestRepairOnAppendOnlyFS(t *testing.T) {
	dev, err := flash.NewMemory(flash.Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 32,
		PageSize: 4096, OOBSize: 128}, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sfs, err := sdf.Format(dev, sdf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := sdfvfs.New(sfs, sdfvfs.Options{NoDuplication: true})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuard(t, inner, guardfs.Options{})
	writeSST(t, g, "000001.sst", 2000)
	orig, err := guardtest.ReadFile(inner, "000001.sst")
	if err != nil {
		t.Fatal(err)
	}
	f, err := inner.OpenReadWrite("000001.sst", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 40), int64(len(orig)-40)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	g = newGuard(t, inner, guardfs.Options{})
	mustRead(t, g, "000001.sst", orig)
	if s := g.Stats(); s.RangeRepairs == 0 {
		t.Fatalf("no repair: %s", s)
	}
	if got, _ := guardtest.ReadFile(inner, "000001.sst"); string(got) != string(orig) {
		t.Fatal("not repaired on sdfvfs")
	}
}
