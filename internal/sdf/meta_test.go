package sdf

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

func TestReopenFileBackend(t *testing.T) {
	dir := t.TempDir()
	g := small()
	dev, err := flash.OpenFile(dir, g, flash.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Format(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(4))
	want := map[string][]byte{}
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("dir/f%d", i)
		want[name] = randBytes(rng, rng.Intn(200_000))
		writeFile(t, fs, name, Lifetime(i%int(numLifetimes)), want[name])
	}
	if err := fs.Remove("dir/f3"); err != nil {
		t.Fatal(err)
	}
	delete(want, "dir/f3")
	if err := fs.Rename("dir/f4", "dir/g4"); err != nil {
		t.Fatal(err)
	}
	want["dir/g4"] = want["dir/f4"]
	delete(want, "dir/f4")
	// An open writer whose last sync is durable; bytes after it are not.
	f, _ := fs.Create("log", LifetimeShort)
	f.Write([]byte("synced"))
	f.Sync()
	want["log"] = []byte("synced")
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		dev, err = flash.OpenFile(dir, g, flash.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		fs, err = Open(dev, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkFiles(t, fs, want)
		// Append to the set each round so later reopens replay more.
		name := fmt.Sprintf("round%d", round)
		want[name] = randBytes(rng, 50_000)
		writeFile(t, fs, name, LifetimeLong, want[name])
		if err := fs.Close(); err != nil {
			t.Fatal(err)
		}
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func checkFiles(t *testing.T, fs *FS, want map[string][]byte) {
	t.Helper()
	names := fs.List()
	if len(names) != len(want) {
		t.Fatalf("files %v, want %d files", names, len(want))
	}
	for name, data := range want {
		mustEqual(t, name, readFile(t, fs, name), data)
	}
}

// buildMetaDevice makes the same device and files every time (fixed seeds,
// manual clock), closes the FS and returns the device and the files.
func buildMetaDevice(t *testing.T) (*flash.Emulator, map[string][]byte) {
	clock := base.NewManualClock(time.Unix(1_700_000_000, 0))
	dev, err := flash.NewMemory(small(), flash.Options{Seed: 5, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Clock: clock}
	fs, err := Format(dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(5))
	want := map[string][]byte{}
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("sst/%06d.sst", i)
		want[name] = randBytes(rng, rng.Intn(60_000))
		writeFile(t, fs, name, LifetimeMedium, want[name])
		clock.Advance(time.Second)
	}
	fs.Remove("sst/000002.sst")
	delete(want, "sst/000002.sst")
	fs.Rename("sst/000005.sst", "MANIFEST")
	want["MANIFEST"] = want["sst/000005.sst"]
	delete(want, "sst/000005.sst")
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	return dev, want
}

// TestMetadataPageLoss corrupts each metadata page in turn (a persistent
// bit flip, or an uncorrectable read) and checks that reopening loses
// nothing: every record is on two pages on different dies.
func TestMetadataPageLoss(t *testing.T) {
	dev, _ := buildMetaDevice(t)
	g := small()
	var pages []flash.PageAddr
	for z := 0; z < metaZoneCount; z++ {
		l := layout{g: g}
		for d := 0; d < g.DiesPerChannel; d++ {
			info, _ := dev.Block(l.zoneBlockAddr(z, d))
			for p := 0; p < info.WrittenPage; p++ {
				pages = append(pages, flash.PageAddr{Channel: l.zoneChannel(z), Die: d, Block: l.zoneBlock(z), Page: p})
			}
		}
	}
	if len(pages) < 4 {
		t.Fatalf("only %d metadata pages", len(pages))
	}
	t.Logf("%d metadata pages", len(pages))
	for i, a := range pages {
		dev, want := buildMetaDevice(t)
		if i%2 == 0 {
			dev.Faults().FlipBit(a, 8*100+3, true /* persistent */)
		} else {
			dev.Faults().FailRead(a)
		}
		fs, err := Open(dev, Options{})
		if err != nil {
			t.Fatalf("page %s lost: open: %v", a, err)
		}
		checkFiles(t, fs, want)
		fs.Close()
	}
}

// TestMetadataCheckpointRollover fills the journal zones many times over
// with small records (one page per sync) and checks the state survives.
func TestMetadataCheckpointRollover(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	f, err := fs.Create("wal", LifetimeShort)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 400; i++ {
		b := []byte(fmt.Sprintf("record %d;", i))
		want = append(want, b...)
		f.Write(b)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		// A file sync no longer writes the journal (its extents are
		// recovered from OOB); FS.Sync does, one page per call.
		if err := fs.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	st := fs.Stats()
	if st.Checkpoints < 3 {
		t.Fatalf("%d checkpoints after 400 syncs", st.Checkpoints)
	}
	fs.Close()
	fs, err = Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	mustEqual(t, "wal", readFile(t, fs, "wal"), want)
	t.Logf("checkpoints %d, write amplification %.1f for 400 tiny synced appends", st.Checkpoints, st.WriteAmplification())
}

// TestMetadataBothCopiesLost is the control for TestMetadataPageLoss: when
// both copies of the first page of the newest epoch are damaged, the layer
// must not silently serve that epoch (it falls back to an older complete
// epoch or refuses to open).
func TestMetadataBothCopiesLost(t *testing.T) {
	dev, want := buildMetaDevice(t)
	g := small()
	l := layout{g: g}
	type copyAt struct {
		a     flash.PageAddr
		epoch uint64
		seq   uint32
	}
	var copies []copyAt
	var newest uint64
	for z := 0; z < metaZoneCount; z++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			info, _ := dev.Block(l.zoneBlockAddr(z, d))
			for p := 0; p < info.WrittenPage; p++ {
				a := flash.PageAddr{Channel: l.zoneChannel(z), Die: d, Block: l.zoneBlock(z), Page: p}
				data := make([]byte, g.PageSize)
				if _, err := dev.Read(a, data, nil); err != nil {
					t.Fatal(err)
				}
				if epoch, seq, _, ok := parseMetaPage(data); ok && seq != fillerSeq {
					copies = append(copies, copyAt{a, epoch, seq})
					newest = max(newest, epoch)
				}
			}
		}
	}
	n := 0
	for _, c := range copies {
		if c.epoch == newest && c.seq == 0 {
			dev.Faults().FlipBit(c.a, 8*40, true)
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d copies of the newest epoch's first page, want 2", n)
	}
	fs, err := Open(dev, Options{})
	if err == nil {
		defer fs.Close()
		if len(fs.List()) == len(want) {
			t.Fatalf("both copies lost, yet the newest epoch's %d files were served", len(want))
		}
	}
}
