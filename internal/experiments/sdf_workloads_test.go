package experiments

import (
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf"
)

func TestSDFLoadsRun(t *testing.T) {
	dev, fs := newSDF(t, flash.SmallGeometry())
	defer fs.Close()
	rows, err := runSDFLoads(dev, fs, sdfLoadOptions{Seed: 1, RandomReads: 20})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Test]++
		if r.Bytes <= 0 || r.Elapsed <= 0 {
			t.Fatalf("row %s", r)
		}
	}
	if seen["seq-write"] != 2 || seen["seq-read"] != 2 || seen["raw-read"] != 2 || seen["rand-read"] != 3 {
		t.Fatalf("rows %v", rows)
	}
	if n := len(fs.List()); n != 0 {
		t.Fatalf("bench left %d files", n)
	}
}

func TestSDFOverwriteAmplification(t *testing.T) {
	g := flash.SmallGeometry()
	g.BlocksPerDie = 48
	_, fs := newSDF(t, g)
	defer fs.Close()
	r, err := runSDFOverwrite(fs, 0.6, 16*1024, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	// Random overwrites at 60% fill need GC: amplification above 1, and
	// bounded (greedy GC at utilisation u copies about u/(1-u) pages per
	// page freed in the worst case).
	if r.GCPages == 0 || r.Amplification <= 1 || r.Amplification > 6 {
		t.Fatalf("%s", r)
	}
}

// TestSyncedAppendsWriteNoMetadata: a page-sized record per sync costs about
// one page (no metadata page per sync, only per zone opened and sealed).
func TestSDFSyncedAppendsWriteNoMetadata(t *testing.T) {
	_, fs := newSDF(t, flash.SmallGeometry())
	defer fs.Close()
	before := fs.Stats().MetaPages
	wa, err := runSDFSyncedAppends(fs, 4096, 200)
	if err != nil {
		t.Fatal(err)
	}
	meta := fs.Stats().MetaPages - before
	if wa > 1.3 || meta > 40 {
		t.Fatalf("write amplification %.2f with %d metadata pages for 200 synced 4KiB appends", wa, meta)
	}
}

// newSDF formats an SDF layer with default options on an in-memory device
// of geometry g.
func newSDF(t *testing.T, g flash.Geometry) (*flash.Emulator, *sdf.FS) {
	t.Helper()
	dev, err := flash.NewMemory(g, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := sdf.Format(dev, sdf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dev, fs
}
