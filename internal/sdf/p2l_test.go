package sdf

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
)

// populate writes files of mixed lifetimes and sizes, overwrites and
// removes some (so P2L pages list dead owners too), and leaves some zones
// open. It returns the live content.
func populate(t *testing.T, fs *FS, seed int64) map[string][]byte {
	rng := rand.New(rand.NewSource(seed))
	want := map[string][]byte{}
	for i := 0; i < 30; i++ {
		name := fmt.Sprintf("f%02d", rng.Intn(14))
		data := randBytes(rng, rng.Intn(150_000))
		writeFile(t, fs, name, Lifetime(rng.Intn(int(numLifetimes))), data)
		want[name] = data
		if rng.Intn(6) == 0 {
			fs.Remove(name)
			delete(want, name)
		}
	}
	return want
}

// lostByReading is the independent reference: read every page of every file
// and collect those that fail because their die failed.
func lostByReading(t *testing.T, fs *FS, want map[string][]byte, die flash.DieAddr) map[string][]int64 {
	lost := map[string][]int64{}
	ps := int64(fs.l.Geometry.PageSize)
	for name, data := range want {
		f, err := fs.OpenFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < int64(len(data)); off += ps {
			buf := make([]byte, min(ps, int64(len(data))-off))
			_, err := f.ReadAt(buf, off)
			var ce *CorruptionError
			switch {
			case err == nil:
				mustEqual(t, name, buf, data[off:off+int64(len(buf))])
			case errors.As(err, &ce):
				if !errors.Is(err, base.ErrCorruption) || !errors.Is(err, flash.ErrDieFailed) {
					t.Fatalf("%s@%d: %v", name, off, err)
				}
				if ce.Addr.DieAddr() != die || ce.Name != name || ce.Off != off || ce.Len != int64(len(buf)) {
					t.Fatalf("corruption error names the wrong range: %+v (want %s [%d,+%d) on %s)", ce, name, off, len(buf), die)
				}
				lost[name] = append(lost[name], off)
			default:
				t.Fatalf("%s@%d: %v", name, off, err)
			}
		}
		f.Close()
	}
	return lost
}

func rangesToPages(rs []FileRange, ps int64) map[string][]int64 {
	out := map[string][]int64{}
	for _, r := range rs {
		for off := r.Off; off < r.Off+r.Len; off += ps {
			out[r.Name] = append(out[r.Name], off)
		}
	}
	return out
}

func TestP2LEntrustmentIdentifiesFailedDie(t *testing.T) {
	for _, die := range []flash.DieAddr{{Channel: 0, Die: 1}, {Channel: 1, Die: 0}} {
		t.Run(die.String(), func(t *testing.T) {
			dev, fs := newMem(t, small(), Options{MaxOpenZones: 3})
			defer fs.Close()
			want := populate(t, fs, 7)
			if err := dev.FailDie(die); err != nil {
				t.Fatal(err)
			}
			byP2L, st, err := fs.LostRanges(die)
			if err != nil {
				t.Fatal(err)
			}
			byScan, st2, err := fs.LostRangesScan(die)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; %s; %d ranges", st, st2, len(byP2L))
			if st.PagesRead == 0 {
				t.Fatal("entrustment read no P2L page")
			}
			if !reflect.DeepEqual(byP2L, byScan) {
				t.Fatalf("entrustment and scan differ:\n%v\n%v", byP2L, byScan)
			}
			ps := int64(fs.l.Geometry.PageSize)
			ref := lostByReading(t, fs, want, die)
			got := rangesToPages(byP2L, ps)
			if len(ref) == 0 {
				t.Fatal("no data on the failed die: the test proves nothing")
			}
			if !reflect.DeepEqual(got, ref) {
				t.Fatalf("identified %v\nreads lost %v", got, ref)
			}
			// The failed die is noted and no zone on it takes writes.
			if fd := fs.FailedDies(); len(fd) != 1 || fd[0] != die {
				t.Fatalf("failed dies %v", fd)
			}
			// Repair: rewrite every lost range from the reference copy.
			for _, r := range byP2L {
				if err := fs.RewriteRange(r.Name, r.Off, want[r.Name][r.Off:r.Off+r.Len]); err != nil {
					t.Fatal(err)
				}
			}
			checkFiles(t, fs, want)
			if after, _, _ := fs.LostRangesScan(die); len(after) != 0 {
				t.Fatalf("still on the failed die after repair: %v", after)
			}
			// New writes avoid the failed die.
			writeFile(t, fs, "new", LifetimeShort, randBytes(rand.New(rand.NewSource(1)), 200_000))
			if rs, _, _ := fs.LostRangesScan(die); len(rs) != 0 {
				t.Fatalf("new data placed on the failed die: %v", rs)
			}
		})
	}
}

// TestP2LAfterReopen checks entrustment for zones filled after a reopen
// (owners read back from OOB) and for zones whose P2L page is unreadable
// (fallback to the scan).
func TestP2LAfterReopen(t *testing.T) {
	dev, fs := newMem(t, small(), Options{MaxOpenZones: 2})
	want := populate(t, fs, 8)
	fs.Close()
	fs, err := Open(dev, Options{MaxOpenZones: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("after%d", i)
		want[name] = randBytes(rng, 90_000)
		writeFile(t, fs, name, LifetimeNone, want[name])
	}
	die := flash.DieAddr{Channel: 1, Die: 1}
	// Make one P2L page that describes the die unreadable.
	host := flash.DieAddr{Channel: 1, Die: 0}
	var corrupted bool
	for _, z := range fs.Zones() {
		if z.Channel == 1 && z.State == ZoneFull && !z.Meta && !corrupted {
			dev.Faults().FailRead(flash.PageAddr{Channel: 1, Die: host.Die, Block: z.Block, Page: fs.l.P2LPage()})
			corrupted = true
		}
	}
	dev.FailDie(die)
	byP2L, st, _ := fs.LostRanges(die)
	byScan, _, _ := fs.LostRangesScan(die)
	if !corrupted || st.ZonesByScan == 0 {
		t.Fatalf("fallback not exercised: %s", st)
	}
	if !reflect.DeepEqual(byP2L, byScan) {
		t.Fatalf("entrustment and scan differ:\n%v\n%v", byP2L, byScan)
	}
	if got, ref := rangesToPages(byP2L, int64(fs.l.Geometry.PageSize)), lostByReading(t, fs, want, die); !reflect.DeepEqual(got, ref) {
		t.Fatalf("identified %v\nreads lost %v", got, ref)
	}
}

func TestCorruptPageTypedErrorAndRepair(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	defer fs.Close()
	rng := rand.New(rand.NewSource(10))
	data := randBytes(rng, 50_000)
	writeFile(t, fs, "obj", LifetimeLong, data)
	ps := int64(fs.l.Geometry.PageSize)
	ino := fs.files["obj"]
	addrOf := func(page uint64) flash.PageAddr {
		e, _ := ino.m.Find(page)
		z := fs.zones.All[e.Zone]
		return fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+int(page-e.FilePage))
	}
	f, _ := fs.OpenFile("obj")
	defer f.Close()

	for _, tc := range []struct {
		name   string
		page   uint64
		inject func(a flash.PageAddr)
		cause  error
	}{
		{"bit flip in data", 3, func(a flash.PageAddr) { dev.Faults().FlipBit(a, 77, true) }, errChecksum},
		{"bit flip in OOB identity", 5, func(a flash.PageAddr) { dev.Faults().FlipBit(a, 8*int(ps)+8*9, true) }, errChecksum},
		{"uncorrectable", 10, func(a flash.PageAddr) { dev.Faults().FailRead(a) }, flash.ErrUncorrectable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := addrOf(tc.page)
			tc.inject(a)
			// ReadRaw returns the damaged content and lists the page.
			if tc.cause == errChecksum {
				raw, bad, err := fs.ReadRaw("obj", 0, int64(len(data)))
				if err != nil || len(bad) != 1 || len(raw) != len(data) {
					t.Fatalf("raw read: %d bytes, %d bad, %v", len(raw), len(bad), err)
				}
			}
			buf := make([]byte, len(data))
			n, err := f.ReadAt(buf, 0)
			var ce *CorruptionError
			if !errors.As(err, &ce) || !base.IsCorruption(err) || !errors.Is(err, tc.cause) {
				t.Fatalf("read: %v", err)
			}
			off := int64(tc.page) * ps
			if ce.Off != off || ce.Len != ps || ce.Name != "obj" || ce.Addr != a || int64(n) != off {
				t.Fatalf("error %+v, n %d; want page at %d of obj on %s", ce, n, off, a)
			}
			mustEqual(t, "bytes before the damage", buf[:n], data[:n])
			if err := fs.RewriteRange("obj", ce.Off, data[ce.Off:ce.Off+ce.Len]); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(buf, 0); err != nil {
				t.Fatalf("after repair: %v", err)
			}
			mustEqual(t, "after repair", buf, data)
			if addrOf(tc.page) == a {
				t.Fatal("repair rewrote in place")
			}
		})
	}
	// A misdirected write: a page holding another file's data at the
	// expected place fails the identity check.
	writeFile(t, fs, "other", LifetimeLong, randBytes(rng, 3*int(ps)))
	other := fs.files["other"]
	fs.mu.Lock()
	oe, _ := other.m.Find(0)
	e, _ := ino.m.Find(0)
	ino.m.Put(extmap.Extent{FilePage: 0, Zone: oe.Zone, ZonePage: oe.ZonePage, N: 1, Seq: e.Seq}, nil)
	fs.mu.Unlock()
	_, err := f.ReadAt(make([]byte, ps), 0)
	if !errors.Is(err, errIdentity) {
		t.Fatalf("misdirected page: %v", err)
	}
}

func TestTransientFlipIsReread(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	defer fs.Close()
	data := randBytes(rand.New(rand.NewSource(11)), 20_000)
	writeFile(t, fs, "x", LifetimeNone, data)
	ino := fs.files["x"]
	e, _ := ino.m.Find(2)
	z := fs.zones.All[e.Zone]
	dev.Faults().FlipBit(fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+2-int(e.FilePage)), 5, false /* transient */)
	mustEqual(t, "x", readFile(t, fs, "x"), data)
	if st := fs.Stats(); st.Transients != 1 || st.Rereads != 1 || st.Corruptions != 0 {
		t.Fatalf("transient flip: %s", st)
	}
}

func TestCreateOnChannel(t *testing.T) {
	_, fs := newMem(t, small(), Options{})
	defer fs.Close()
	rng := rand.New(rand.NewSource(12))
	for ch := 0; ch < 2; ch++ {
		f, err := fs.CreateOn(fmt.Sprintf("c%d", ch), LifetimeNone, ch)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(randBytes(rng, 300_000))
		f.Close()
		fi, _ := fs.Stat(fmt.Sprintf("c%d", ch))
		for _, z := range fi.Zones {
			if fs.Zones()[z].Channel != ch {
				t.Fatalf("file pinned to channel %d has zone %d on channel %d", ch, z, fs.Zones()[z].Channel)
			}
		}
	}
	if _, err := fs.CreateOn("bad", LifetimeNone, 2); !base.IsInvalidArgument(err) {
		t.Fatalf("channel out of range: %v", err)
	}
}
