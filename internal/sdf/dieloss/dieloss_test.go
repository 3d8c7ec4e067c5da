package dieloss

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
	"github.com/flashmend/flashmend/internal/testseed"
)

var testGeometry = flash.Geometry{Channels: 3, DiesPerChannel: 4, BlocksPerDie: 10, PagesPerBlock: 6, PageSize: 512, OOBSize: 64}

// world is a table with files written into it page by page, as the SDF
// layer would: every data page's owner is kept, pages overwritten or of
// removed files stay as dead owners, full zones have their P2L pages.
type world struct {
	t     *zones.Table
	files map[uint64]*File
	seq   uint64
}

func newWorld(g flash.Geometry) *world {
	l := onflash.Layout{Geometry: g}
	return &world{t: zones.New(l, make([]flash.BlockInfo, g.Dies()*g.BlocksPerDie)), files: map[uint64]*File{}, seq: 1}
}

func (w *world) lookup(id uint64) (File, bool) {
	f, ok := w.files[id]
	if !ok {
		return File{}, false
	}
	return *f, true
}

func (w *world) list() []File {
	var out []File
	for _, f := range w.files {
		out = append(out, *f)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// write programs file page p of f in a random open or empty data zone.
func (w *world) write(rng *rand.Rand, f *File, p uint64) bool { return w.writeOn(rng, f, p, -1) }

// writeOn is write on channel ch (< 0: any).
func (w *world) writeOn(rng *rand.Rand, f *File, p uint64, ch int) bool {
	var open []*zones.Zone
	for _, z := range w.t.Data() {
		if z.Writable(w.t.L) && (ch < 0 || z.Channel == ch) {
			open = append(open, z)
		}
	}
	if len(open) == 0 {
		return false
	}
	z := open[rng.Intn(len(open))]
	if z.State == zones.Empty {
		z.State = zones.Open
		z.Owners = make([]onflash.Owner, z.Capacity(w.t.L))
		z.OwnersKnown = make([]bool, z.Capacity(w.t.L))
	}
	zp := z.WP
	z.WP++
	z.Owners[zp] = onflash.Owner{FileID: f.ID, Page: uint32(p)}
	z.OwnersKnown[zp] = true
	f.Map.Put(extmap.Extent{FilePage: p, Zone: z.ID, ZonePage: zp, N: 1, Seq: w.seq}, func(e extmap.Extent) { w.t.All[e.Zone].Live -= e.N })
	z.Live++
	w.seq++
	f.Size = max(f.Size, int64(p+1)*int64(w.t.L.Geometry.PageSize)-int64(rng.Intn(2)*100))
	if z.WP == z.Capacity(w.t.L) {
		z.Finish(len(z.Dies) >= 2)
	}
	return true
}

// fill writes random files with overwrites and removals; some zones lose
// their owner lists (as after a reopen), and some dies of empty zones are
// gone.
func fill(rng *rand.Rand, g flash.Geometry) *world {
	w := newWorld(g)
	for _, z := range w.t.Data() {
		if rng.Intn(8) == 0 {
			z.Dies = z.Dies[1:]
		}
	}
	next := uint64(1)
	for step := 0; step < 400; step++ {
		if len(w.files) == 0 || rng.Intn(10) == 0 {
			w.files[next] = &File{ID: next, Name: fmt.Sprintf("f%d", next), Map: &extmap.Map{}}
			next++
		}
		ids := make([]uint64, 0, len(w.files))
		for id := range w.files {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		f := w.files[ids[rng.Intn(len(ids))]]
		if rng.Intn(40) == 0 {
			f.Map.Truncate(0, func(e extmap.Extent) { w.t.All[e.Zone].Live -= e.N })
			delete(w.files, f.ID)
			continue
		}
		if !w.write(rng, f, uint64(rng.Intn(12))) {
			break
		}
	}
	for _, z := range w.t.Data() {
		if !z.P2L && z.WP > 0 && rng.Intn(4) == 0 {
			// Written before a reopen: the owner is on flash only.
			i := rng.Intn(z.WP)
			z.OwnersKnown[i], z.Owners[i] = false, onflash.Owner{}
		}
	}
	return w
}

// bruteForce is every page some file maps on die d, by file, from the maps
// alone.
func bruteForce(w *world, d flash.DieAddr, win reparo.Window) map[uint64][]uint64 {
	out := map[uint64][]uint64{}
	for id, f := range w.files {
		if !win.Contains(id) {
			continue
		}
		for p := uint64(0); p < 16; p++ {
			e, ok := f.Map.Find(p)
			if !ok {
				continue
			}
			z := w.t.All[e.Zone]
			zp := e.ZonePage + int(p-e.FilePage)
			if z.Channel == d.Channel && z.Dies[zp%len(z.Dies)] == d.Die {
				out[id] = append(out[id], p)
			}
		}
	}
	return out
}

func sorted(m map[uint64][]uint64) map[uint64][]uint64 {
	for id, ps := range m {
		slices.Sort(ps)
		m[id] = slices.Compact(ps)
		if len(ps) == 0 {
			delete(m, id)
		}
	}
	return m
}

// TestScanAndEntrustmentAgree checks, on random worlds, that the scan
// (Scan) and P2L entrustment (PlanP2L, the P2L pages' owners, Confirm, and
// the scan of the zones it cannot cover) find exactly the pages a brute
// force over the page maps finds, for every die, whole and in windows.
func TestScanAndEntrustmentAgree(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	for run := 0; run < 200; run++ {
		w := fill(rng, testGeometry)
		for c := 0; c < testGeometry.Channels; c++ {
			for die := 0; die < testGeometry.DiesPerChannel; die++ {
				d := flash.DieAddr{Channel: c, Die: die}
				win := reparo.All
				if rng.Intn(2) == 0 {
					win = reparo.Window{From: uint64(rng.Intn(5)), To: uint64(5 + rng.Intn(10))}
				}
				want := sorted(bruteForce(w, d, win))
				var inWin []File
				for _, f := range w.list() {
					if win.Contains(f.ID) {
						inWin = append(inWin, f)
					}
				}
				scan, _ := Scan(w.t, inWin, d, nil)
				if got := sorted(scan); !reflect.DeepEqual(got, want) {
					t.Fatalf("run %d, die %s, window %v: scan %v, want %v", run, d, win, got, want)
				}
				workers := 1 + rng.Intn(5)
				par, parEntries := ScanParallel(w.t, inWin, d, nil, workers)
				_, entries := Scan(w.t, inWin, d, nil)
				if got := sorted(par); !reflect.DeepEqual(got, want) || parEntries != entries {
					t.Fatalf("run %d, die %s, window %v: scan by %d workers %v (%d entries), want %v (%d)",
						run, d, win, workers, got, parEntries, want, entries)
				}
				reads, cands, byScan := PlanP2L(w.t, d)
				for _, r := range reads {
					// The P2L page lists the owner of every data page of d's
					// block, in block order.
					var owners []onflash.Owner
					for i := r.DieIndex; i < r.Zone.Capacity(w.t.L); i += r.Width {
						owners = append(owners, r.Zone.Owners[i])
					}
					cands = append(cands, r.Candidates(owners)...)
				}
				got, _ := Confirm(w.t, cands, w.lookup, d, win)
				if len(byScan) > 0 {
					more, _ := Scan(w.t, inWin, d, byScan)
					for id, ps := range more {
						got[id] = append(got[id], ps...)
					}
				}
				if got = sorted(got); !reflect.DeepEqual(got, want) {
					t.Fatalf("run %d, die %s, window %v: entrustment %v, want %v", run, d, win, got, want)
				}
			}
		}
	}
}

// TestFail checks on random tables that Fail stops writes on the die,
// re-forms its empty data zones, records every change it makes to a data
// zone, asks for a checkpoint exactly when a body or active metadata zone
// is on the die, and changes nothing the second time.
func TestFail(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	for run := 0; run < 300; run++ {
		w := fill(rng, testGeometry)
		for _, z := range w.t.Data() {
			if z.State == zones.Empty && rng.Intn(10) == 0 {
				z.Meta, z.Body, z.State = true, true, zones.Full // lent to a body
			}
		}
		for _, z := range w.t.Meta() {
			if rng.Intn(3) == 0 {
				z.State = zones.Open // the journal's active zones
			}
		}
		d := flash.DieAddr{Channel: rng.Intn(testGeometry.Channels), Die: rng.Intn(testGeometry.DiesPerChannel)}
		type snap struct {
			state zones.State
			dies  []int
		}
		before := map[int]snap{}
		wantCheckpoint := false
		for _, z := range w.t.All {
			before[z.ID] = snap{z.State, slices.Clone(z.Dies)}
			if z.Channel == d.Channel && slices.Contains(z.Dies, d.Die) && (z.Body || (z.Meta && z.State == zones.Open)) {
				wantCheckpoint = true
			}
		}
		recs, checkpoint := Fail(w.t, d, reparo.HandlerCDR)
		if checkpoint != wantCheckpoint {
			t.Fatalf("run %d: checkpoint %v, want %v", run, checkpoint, wantCheckpoint)
		}
		if len(recs) == 0 || recs[0] != (metalog.FailedDie{Channel: d.Channel, Die: d.Die}) || !w.t.Failed[d] || w.t.Alloc == nil {
			t.Fatalf("run %d: records %v, failed %v", run, recs, w.t.Failed)
		}
		recorded := map[string]bool{}
		for _, r := range recs[1:] {
			recorded[fmt.Sprintf("%+v", r)] = true
		}
		for _, z := range w.t.Data() {
			b := before[z.ID]
			onDie := z.Channel == d.Channel && slices.Contains(b.dies, d.Die)
			if z.State == zones.Open && onDie {
				t.Fatalf("run %d: %s still open on the failed die", run, z)
			}
			if z.State == zones.Empty && slices.Contains(z.Dies, d.Die) && z.Channel == d.Channel && !z.Meta {
				t.Fatalf("run %d: empty %s still on the failed die", run, z)
			}
			if z.Meta {
				continue
			}
			if z.State != b.state && z.State == zones.ReadOnly && !recorded[fmt.Sprintf("%+v", metalog.ZoneState{Zone: z.ID, State: uint64(zones.ReadOnly)})] {
				t.Fatalf("run %d: %s made read-only without a record", run, z)
			}
			if !slices.Equal(z.Dies, b.dies) && !recorded[fmt.Sprintf("%+v", metalog.ZoneReset{Zone: z.ID, Mask: onflash.MaskOf(z.Dies)})] {
				t.Fatalf("run %d: %s re-formed without a record", run, z)
			}
			if !onDie && (z.State != b.state || !slices.Equal(z.Dies, b.dies)) {
				t.Fatalf("run %d: %s off the die changed", run, z)
			}
		}
		if len(recs) > 1+2*len(w.t.Data()) {
			t.Fatalf("run %d: %d records", run, len(recs))
		}
		if again, cp := Fail(w.t, d, reparo.HandlerCDR); again != nil || cp {
			t.Fatalf("run %d: a second failure of %s recorded %v", run, d, again)
		}
	}
}

func TestRanges(t *testing.T) {
	files := map[uint64]File{
		1: {ID: 1, Name: "a", Size: 5 * 512},
		2: {ID: 2, Name: "b", Size: 3*512 - 7},
	}
	lookup := func(id uint64) (File, bool) { f, ok := files[id]; return f, ok }
	pages := map[uint64][]uint64{
		2: {2, 0, 1, 1},    // unsorted, a duplicate, the last page partial
		1: {4, 0, 1, 3, 9}, // two runs and a page past the size
		7: {0},             // a file that is gone
	}
	var got []string
	for _, r := range Ranges(pages, lookup, 512) {
		got = append(got, r.String())
	}
	want := "a[0,1024) a[1536,2560) b[0,1529)"
	if strings.Join(got, " ") != want {
		t.Fatalf("ranges %v, want %s", got, want)
	}
}

// TestUsageHealthAndFakeFailures: after a die fails on a balanced device, CDR
// moves data off the victim channel only, from its surviving dies, at
// least its excess; IDR moves nothing; losing every die of a channel
// degrades the device.
func TestUsageHealthAndFakeFailures(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	w := newWorld(testGeometry)
	for id := uint64(1); id <= 12; id++ {
		f := &File{ID: id, Name: fmt.Sprint(id), Map: &extmap.Map{}}
		w.files[id] = f
		for p := uint64(0); p < 12; p++ {
			// Balanced over the channels, as round-robin allocation is.
			w.writeOn(rng, f, p, int(id*12+p)%testGeometry.Channels)
		}
	}
	if h := Check(w.t, 2); h.Degraded || h.FailedDies != 0 || h.Live != 144*512 {
		t.Fatalf("healthy device: %+v", h)
	}
	if pages, over := FakeFailures(w.t, w.list(), reparo.HandlerCDR); pages != nil || over != nil {
		t.Fatalf("fake failures before any die failed: %v", pages)
	}
	d := flash.DieAddr{Channel: 1, Die: 2}
	Fail(w.t, d, reparo.HandlerCDR)
	u := Usage(w.t)
	if u[1].LiveDies != 3 || u[0].LiveDies != 4 {
		t.Fatalf("usage %+v", u)
	}
	pages, over := FakeFailures(w.t, w.list(), reparo.HandlerCDR)
	if !over[1] || over[0] || over[2] {
		t.Fatalf("over %v, want only the victim channel", over)
	}
	var moved int64
	for id, ps := range pages {
		for _, p := range ps {
			e, _ := w.files[id].Map.Find(p)
			z := w.t.All[e.Zone]
			if die := z.Dies[(e.ZonePage+int(p-e.FilePage))%len(z.Dies)]; z.Channel != 1 || die == d.Die {
				t.Fatalf("file %d page %d on ch%d die %d moved", id, p, z.Channel, die)
			}
			moved++
		}
	}
	shares := reparo.Shares(reparo.HandlerCDR, []int{4, 3, 4})
	total := u[0].LivePages + u[1].LivePages + u[2].LivePages
	if ex := u[1].LivePages - int64(shares[1]*float64(total)); ex > 0 && moved == 0 {
		t.Fatalf("victim above its share by %d pages, nothing moved", ex)
	}
	if pages, _ := FakeFailures(w.t, w.list(), reparo.HandlerIDR); pages != nil {
		t.Fatalf("IDR moved %v", pages)
	}
	for die := 0; die < testGeometry.DiesPerChannel; die++ {
		Fail(w.t, flash.DieAddr{Channel: 2, Die: die}, reparo.HandlerCDR)
	}
	if h := Check(w.t, 2); !h.Degraded || h.FailedDies != 5 || !strings.Contains(h.Reason, "channels [2] lost every die") {
		t.Fatalf("a channel lost: %+v", h)
	}
	if PagesWritten(w.t, d) == 0 {
		t.Fatalf("no page written on %s", d)
	}
}
