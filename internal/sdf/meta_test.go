package sdf

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/testseed"
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
	for z := 0; z < onflash.MetaZoneCount; z++ {
		l := onflash.Layout{Geometry: g}
		for d := 0; d < g.DiesPerChannel; d++ {
			info, _ := dev.Block(l.ZoneBlockAddr(z, d))
			for p := 0; p < info.WrittenPage; p++ {
				pages = append(pages, flash.PageAddr{Channel: l.ZoneChannel(z), Die: d, Block: l.ZoneBlock(z), Page: p})
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

// metaCopyAt is one copy of a metadata page on the device.
type metaCopyAt struct {
	a     flash.PageAddr
	epoch uint64
	seq   uint32
	units int
}

// metaPageCopies lists the whole, verifying metadata page copies on dev and
// the newest epoch among them.
func metaPageCopies(t *testing.T, dev *flash.Emulator) ([]metaCopyAt, uint64) {
	t.Helper()
	g := dev.Geometry()
	l := onflash.Layout{Geometry: g}
	var copies []metaCopyAt
	var newest uint64
	for z := 0; z < onflash.MetaZoneCount; z++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			info, _ := dev.Block(l.ZoneBlockAddr(z, d))
			for p := 0; p < info.WrittenPage; p++ {
				a := flash.PageAddr{Channel: l.ZoneChannel(z), Die: d, Block: l.ZoneBlock(z), Page: p}
				data := make([]byte, g.PageSize)
				if _, err := dev.Read(a, data, nil); err != nil {
					t.Fatal(err)
				}
				if epoch, seq, payload, ok := onflash.ParseMetaPage(data); ok && seq != onflash.FillerSeq {
					units := max(1, (len(payload)+onflash.MetaUnitPayload-1)/onflash.MetaUnitPayload)
					copies = append(copies, metaCopyAt{a, epoch, seq, units})
					newest = max(newest, epoch)
				}
			}
		}
	}
	return copies, newest
}

// TestMetadataAllCopiesLost is the control for TestMetadataPageLoss: when
// the same bit of the first page of the newest epoch is flipped in every
// copy (no copy verifies and the vote gives the flipped bit), the layer must
// not silently serve that epoch (it falls back to an older complete epoch or
// refuses to open).
func TestMetadataAllCopiesLost(t *testing.T) {
	dev, want := buildMetaDevice(t)
	copies, newest := metaPageCopies(t, dev)
	n := 0
	for _, c := range copies {
		if c.epoch == newest && c.seq == 0 {
			dev.Faults().FlipBit(c.a, 8*40, true)
			n++
		}
	}
	if n != onflash.MetaCopies {
		t.Fatalf("%d copies of the newest epoch's first page, want %d", n, onflash.MetaCopies)
	}
	fs, err := Open(dev, Options{})
	if err == nil {
		defer fs.Close()
		if len(fs.List()) == len(want) {
			t.Fatalf("every copy lost, yet the newest epoch's %d files were served", len(want))
		}
	}
}

// TestMetadataUnitMerge damages every copy of every page of the newest
// epoch, each copy in a different unit (merged from the others), then the
// same unit of every copy at different bits (voted): the device opens with
// every file, and OpenInfo says what was merged and voted.
func TestMetadataUnitMerge(t *testing.T) {
	for _, mode := range []string{"merge", "vote"} {
		t.Run(mode, func(t *testing.T) {
			dev, want := buildMetaDevice(t)
			copies, newest := metaPageCopies(t, dev)
			nth := map[uint32]int{}
			damaged := 0
			for _, c := range copies {
				if c.epoch != newest {
					continue
				}
				i := nth[c.seq]
				nth[c.seq]++
				unit, bit := i%c.units, 8*(onflash.MetaUnitHeader+30)+i
				if mode == "vote" {
					unit = 0
				}
				if mode == "merge" && c.units < onflash.MetaCopies && i >= c.units {
					continue // fewer units than copies: leave this copy whole
				}
				dev.Faults().FlipBit(c.a, unit*onflash.MetaUnitSize*8+bit, true)
				damaged++
			}
			if damaged == 0 {
				t.Fatal("no page damaged")
			}
			fs, err := Open(dev, Options{})
			if err != nil {
				t.Fatalf("%d copies damaged: %v", damaged, err)
			}
			defer fs.Close()
			checkFiles(t, fs, want)
			info := fs.OpenInfo()
			t.Logf("%d copies damaged: %s", damaged, info)
			if info.MetaPagesLost != 0 || info.MetaUnitsMerged == 0 || (mode == "vote") != (info.MetaUnitsVoted > 0) {
				t.Fatalf("open info %s", info)
			}
		})
	}
}

// TestMetadataRandomFlips flips random bits in the used units of the metadata
// pages, zero to two per copy (seeded), then opens: every file must be
// there with its content, or the open must fail; never a wrong file.
func TestMetadataRandomFlips(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for iter := 0; iter < 5; iter++ {
		dev, want := buildMetaDevice(t)
		copies, _ := metaPageCopies(t, dev)
		for _, c := range copies {
			for k := rng.Intn(3); k > 0; k-- {
				dev.Faults().FlipBit(c.a, rng.Intn(8*onflash.MetaUnitSize*c.units), true)
			}
		}
		fs, err := Open(dev, Options{})
		if err != nil {
			t.Logf("iteration %d: open refused: %v", iter, err)
			continue
		}
		info := fs.OpenInfo()
		if info.MetaPagesLost == 0 {
			checkFiles(t, fs, want)
		}
		t.Logf("iteration %d: %s", iter, info)
		fs.Close()
	}
}
