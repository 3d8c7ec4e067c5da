package sdf

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// manyFilesGeometry has small metadata zones (2 dies x 16 pages) and many
// data zones: a file table of one-page files outgrows a metadata zone when
// the device is a third full.
func manyFilesGeometry() flash.Geometry {
	return flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 32, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
}

// fillWithSmallFiles writes one-page files until the device says no space
// and returns their contents.
func fillWithSmallFiles(t *testing.T, fs *FS, rng *rand.Rand, prefix string, max int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for i := 0; i < max; i++ {
		name := fmt.Sprintf("%s/chunk-%08d", prefix, i)
		data := randBytes(rng, 1+rng.Intn(fs.l.Geometry.PageSize))
		f, err := fs.Create(name, LifetimeMedium)
		if err != nil {
			if errors.Is(err, ErrNoSpace) {
				return want
			}
			t.Fatalf("create %s: %v", name, err)
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			if errors.Is(err, ErrNoSpace) {
				fs.Remove(name)
				return want
			}
			t.Fatalf("write %s: %v", name, err)
		}
		want[name] = data
	}
	return want
}

// lentZones counts the data zones lent to the journal.
func lentZones(fs *FS) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := 0
	for _, z := range fs.zones.All {
		if z.Body {
			n++
		}
	}
	return n
}

// TestCheckpointBodyLetsSmallFilesFillTheDevice: a device of one-page files
// fills its data zones, not its metadata zones. Before checkpoint bodies the
// whole state had to fit one metadata zone per copy, and this device stopped
// taking files at about half its capacity ("fewer than 3 usable
// metadata zones").
func TestCheckpointBodyLetsSmallFilesFillTheDevice(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	g := manyFilesGeometry()
	dev, fs := newMem(t, g, Options{})
	want := fillWithSmallFiles(t, fs, rng, "a", 1<<20)
	st := fs.Stats()
	dataPages := (g.Channels*g.BlocksPerDie - onflash.MetaZoneCount) * g.DiesPerChannel * (g.PagesPerBlock - 1)
	t.Logf("seed %d: %d one-page files on %d data pages; %d checkpoints, %d zones lent to the last body, write amplification %.2f",
		seed, len(want), dataPages, st.Checkpoints, lentZones(fs), st.WriteAmplification())
	if len(want) < dataPages*3/4 {
		t.Fatalf("device full after %d one-page files, want at least 3/4 of its %d data pages", len(want), dataPages)
	}
	if lentZones(fs) == 0 {
		t.Fatal("no checkpoint body: the test does not reach the path it is for")
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fs.OpenInfo().BodyPages == 0 {
		t.Fatalf("reopen read no body: %s", fs.OpenInfo())
	}
	checkFiles(t, fs, want)
	// Delete every other file and fill again: the bodies of every
	// checkpoint in between are handed back, so the room comes back.
	n := 0
	for name := range want {
		if n++; n%2 == 0 {
			if err := fs.Remove(name); err != nil {
				t.Fatal(err)
			}
			delete(want, name)
		}
	}
	more := fillWithSmallFiles(t, fs, rng, "b", 1<<20)
	if len(more) < len(want)/2 {
		t.Fatalf("only %d files fit after %d were removed", len(more), len(want))
	}
	for k, v := range more {
		want[k] = v
	}
	// No zone leaks to the journal: only the last body's zones are lent.
	bodyZones := 0
	if _, lent, ok := fs.jr.Body(); ok {
		bodyZones = len(lent)
	}
	if got := lentZones(fs); got != bodyZones {
		t.Fatalf("%d zones lent to the journal, the last body has %d", got, bodyZones)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs, err = Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	checkFiles(t, fs, want)
}

// bodyDevice is a closed device whose last checkpoint has a body, with the
// files on it and the body's record.
func bodyDevice(t *testing.T, seed int64) (*flash.Emulator, map[string][]byte, onflash.CheckpointBody) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	dev, fs := newMem(t, manyFilesGeometry(), Options{})
	want := fillWithSmallFiles(t, fs, rng, "a", 2500)
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	// Open writes a new epoch: read its body's place from that one.
	fs, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _, ok := fs.jr.Body()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("no checkpoint body")
	}
	return dev, want, b
}

// bodyPageAddr is the address of page i of copy c of body b.
func bodyPageAddr(g flash.Geometry, b onflash.CheckpointBody, c, i int) flash.PageAddr {
	l := onflash.Layout{Geometry: g}
	for _, r := range b.Copies[c] {
		if i < r.Pages {
			return l.MetaPageAddr(r.Zone, onflash.DiesOf(r.Mask), i)
		}
		i -= r.Pages
	}
	panic("page past the body")
}

// TestCheckpointBodyDamage: a body page lost or flipped in one or two copies
// is merged from the others, a unit flipped in all three is voted back, and
// a page no copy gives back fails the open with a corruption error, never
// with a file table that is wrong.
func TestCheckpointBodyDamage(t *testing.T) {
	g := manyFilesGeometry()
	seed := testSeed(t)
	t.Run("one copy flipped everywhere, another here and there", func(t *testing.T) {
		dev, want, b := bodyDevice(t, seed)
		for i := 0; i < b.Pages(0); i++ {
			// An uncorrectable status alone loses nothing (the units
			// verify on their own); flips do.
			dev.Faults().FailRead(bodyPageAddr(g, b, 0, i))
			dev.Faults().FlipBit(bodyPageAddr(g, b, 0, i), 8*100+i%8, true)
			if i%3 == 0 {
				dev.Faults().FlipBit(bodyPageAddr(g, b, 1, i), 8*700+i%8, true)
			}
		}
		fs, err := Open(dev, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		if info := fs.OpenInfo(); info.BodyPagesMerged != b.Pages(0) {
			t.Fatalf("%s: want all %d body pages merged", info, b.Pages(0))
		}
		checkFiles(t, fs, want)
	})
	t.Run("a unit flipped in all three copies", func(t *testing.T) {
		dev, want, b := bodyDevice(t, seed)
		for c := 0; c < onflash.MetaCopies; c++ {
			// The same unit, a different bit in each copy: only a vote
			// gives it back.
			dev.Faults().FlipBit(bodyPageAddr(g, b, c, 1), 8*(onflash.MetaUnitHeader+10)+c, true)
		}
		fs, err := Open(dev, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		checkFiles(t, fs, want)
	})
	t.Run("a unit lost in every copy", func(t *testing.T) {
		dev, _, b := bodyDevice(t, seed)
		for c := 0; c < onflash.MetaCopies; c++ {
			// The same bit in every copy: no copy verifies and the
			// vote gives the flipped bit back, which does not verify.
			dev.Faults().FlipBit(bodyPageAddr(g, b, c, b.Pages(c)/2), 8*(onflash.MetaUnitHeader+3)+1, true)
		}
		_, err := Open(dev, Options{})
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("open with a body page lost in every copy: %v, want a corruption error", err)
		}
	})
}

// TestCheckpointBodyInterrupted: a body written without its root (a crash
// between the two) is no data zone's: reopen uses the previous epoch and
// hands the orphan zones back, and they are erased and reused.
func TestCheckpointBodyInterrupted(t *testing.T) {
	seed := testSeed(t)
	dev, want, _ := bodyDevice(t, seed)
	fs, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	_, records, _ := fs.snapshotLocked()
	fs.mu.Unlock()
	orphan, err := fs.jr.WriteOrphanBody(records)
	if err != nil {
		t.Fatal(err)
	}
	// Crash: abandon fs with the orphan body on flash.
	fs, err = Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	checkFiles(t, fs, want)
	var ids []int
	for _, z := range orphan {
		ids = append(ids, z.ID)
	}
	fs.mu.Lock()
	for _, id := range ids {
		if z := fs.zones.All[id]; z.Meta || z.State == ZoneOpen {
			fs.mu.Unlock()
			t.Fatalf("orphan body %s still lent or taking appends", z)
		}
	}
	fs.mu.Unlock()
	if err := fs.reclaim(); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, id := range ids {
		if z := fs.zones.All[id]; z.State != ZoneEmpty && !z.Body {
			t.Fatalf("orphan body %s not erased by reclaim", z)
		}
	}
}

// TestCheckpointBodyDieFailure: a die holding a copy of the body fails; the
// next flush writes a new epoch whose body avoids it, and the files survive
// a reopen even when a second copy of the old body is damaged too.
func TestCheckpointBodyDieFailure(t *testing.T) {
	seed := testSeed(t)
	g := manyFilesGeometry()
	dev, want, _ := bodyDevice(t, seed)
	fs, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := fs.jr.Body()
	run := b.Copies[0][0]
	d := flash.DieAddr{Channel: onflash.Layout{Geometry: g}.ZoneChannel(run.Zone), Die: onflash.DiesOf(run.Mask)[0]}
	before := fs.Stats().Checkpoints
	fs.mu.Lock()
	fs.noteDieFailedLocked(d)
	fs.mu.Unlock()
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := fs.Stats().Checkpoints; got != before+1 {
		t.Fatalf("checkpoints %d after a die of the body failed, want %d", got, before+1)
	}
	nb, _, _ := fs.jr.Body()
	for c := range nb.Copies {
		for _, r := range nb.Copies[c] {
			l := onflash.Layout{Geometry: g}
			if l.ZoneChannel(r.Zone) == d.Channel && r.Mask&(1<<d.Die) != 0 {
				t.Fatalf("new body copy %d on the failed die %v: %v", c, d, r)
			}
		}
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < nb.Pages(1); i++ {
		dev.Faults().FlipBit(bodyPageAddr(g, nb, 1, i), 8*600+i%8, true)
	}
	fs, err = Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	checkFiles(t, fs, want)
}

// TestCheckpointBodyConcurrentWriters: files written by several goroutines
// while checkpoints write bodies: no writer may append to a zone lent to a
// body (a lent zone that looked open took appends and programmed onto the
// body's pages: "page already programmed"), and every file reads back after
// a reopen.
func TestCheckpointBodyConcurrentWriters(t *testing.T) {
	seed := testSeed(t)
	dev, fs := newMem(t, manyFilesGeometry(), Options{})
	const writers = 4
	results := make([]map[string][]byte, writers)
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			rng := rand.New(rand.NewSource(seed + int64(w)))
			mine := map[string][]byte{}
			results[w] = mine
			for i := 0; i < 700; i++ {
				name := fmt.Sprintf("w%d/chunk-%06d", w, i)
				data := randBytes(rng, 1+rng.Intn(2*fs.l.Geometry.PageSize))
				f, err := fs.Create(name, Lifetime(rng.Intn(3)))
				if err == nil {
					_, err = f.Write(data)
					if err == nil {
						err = f.Sync()
					}
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if errors.Is(err, ErrNoSpace) {
					fs.Remove(name)
					break
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				mine[name] = data
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]byte{}
	for _, m := range results {
		for k, v := range m {
			want[k] = v
		}
	}
	if lentZones(fs) == 0 {
		t.Fatal("no checkpoint body: the test does not reach the path it is for")
	}
	checkFiles(t, fs, want)
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs, err := Open(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	checkFiles(t, fs, want)
}

// TestCreatePreferringSpills: a file created with a preferred channel
// writes there while the channel has room and on another channel once it
// has none, where CreateOn's confinement fails with no space.
func TestCreatePreferringSpills(t *testing.T) {
	_, fs := newMem(t, small(), Options{})
	defer fs.Close()
	page := make([]byte, fs.l.Geometry.PageSize)
	fillChannel(t, fs, 0)
	f, err := fs.CreatePreferring("copy", LifetimeLong, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(page); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("a preferred channel that is full: %v", err)
	}
	st, err := fs.Stat("copy")
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range st.Zones {
		if fs.zones.All[z].Channel == 0 {
			t.Fatalf("spilled file on the full channel 0 (zone %d)", z)
		}
	}
}

// TestCreateApartSpillsAway: a copy created with CreateApart whose
// preferred channel has no room spills onto a channel it need not avoid,
// not onto the channel of what it copies, though an open zone of its own
// lifetime waits there (where CreatePreferring's plain spill may go).
func TestCreateApartSpillsAway(t *testing.T) {
	g := flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	_, fs := newMem(t, g, Options{})
	defer fs.Close()
	page := make([]byte, fs.l.Geometry.PageSize)
	fillChannel(t, fs, 0)
	// The bytes to copy, in an open zone of the copy's lifetime on
	// channel 1, and an open zone of another lifetime on channel 2.
	for _, c := range []struct {
		name string
		hint Lifetime
		ch   int
	}{{"primary", LifetimeLong, 1}, {"other", LifetimeShort, 2}} {
		f, err := fs.CreateOn(c.name, c.hint, c.ch)
		writeAndClose(t, f, err, page)
	}
	channelsOf := func(name string) []int {
		st, err := fs.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, z := range st.Zones {
			out = append(out, fs.zones.All[z].Channel)
		}
		return out
	}
	for _, apart := range []bool{false, true} {
		name := fmt.Sprintf("copy-%v", apart)
		var f *File
		var err error
		if apart {
			f, err = fs.CreateApart(name, LifetimeLong, 0, []int{1})
		} else {
			f, err = fs.CreatePreferring(name, LifetimeLong, 0)
		}
		writeAndClose(t, f, err, page)
		chs := channelsOf(name)
		t.Logf("%s: channels %v (primary on %v)", name, chs, channelsOf("primary"))
		for _, c := range chs {
			if c == 0 {
				t.Fatalf("%s on the full channel 0", name)
			}
			if apart && c == 1 {
				t.Fatalf("%s spilled onto channel 1, which it avoids", name)
			}
		}
	}
	if _, err := fs.CreateApart("bad", LifetimeLong, 0, []int{4}); !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("avoiding channel 4 of 4: %v", err)
	}
}

// fillChannel fills channel ch with one-page files confined to it until it
// has no room left.
func fillChannel(t *testing.T, fs *FS, ch int) {
	t.Helper()
	page := make([]byte, fs.l.Geometry.PageSize)
	for i := 0; ; i++ {
		name := fmt.Sprintf("fill-%d-%d", ch, i)
		f, err := fs.CreateOn(name, LifetimeLong, ch)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(page)
		if err == nil {
			err = f.Close()
		}
		if errors.Is(err, ErrNoSpace) {
			fs.Remove(name)
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 10_000 {
			t.Fatalf("channel %d never filled", ch)
		}
	}
}

// writeAndClose writes data to the file a create returned (with its error)
// and closes it.
func writeAndClose(t testing.TB, f *File, err error, data []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
