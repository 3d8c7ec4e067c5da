package zones

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/testseed"
)

var testGeometry = flash.Geometry{Channels: 4, DiesPerChannel: 4, BlocksPerDie: 8, PagesPerBlock: 8, PageSize: 4096, OOBSize: 64}

func newTable(g flash.Geometry) *Table {
	return New(onflash.Layout{Geometry: g}, make([]flash.BlockInfo, g.Dies()*g.BlocksPerDie))
}

// randomTable is a table of g whose data zones are in random states, with
// random wear, hints, writers, live pages and a few with lost dies.
func randomTable(rng *rand.Rand, g flash.Geometry) *Table {
	t := newTable(g)
	for _, z := range t.Data() {
		z.Erases = rng.Intn(5)
		z.Hint = uint8(rng.Intn(5))
		if rng.Intn(6) == 0 {
			z.Dies = z.Dies[:rng.Intn(len(z.Dies))] // lost dies, maybe all
		}
		switch k := rng.Intn(10); {
		case len(z.Dies) == 0:
			z.State = Offline
		case k < 4:
			z.State = Empty
		case k < 7:
			z.State = Open
			z.WP = rng.Intn(z.Capacity(t.L))
			z.GC = rng.Intn(5) == 0
			if rng.Intn(3) == 0 {
				z.Writers = 1 + rng.Intn(2)
			}
		case k < 9:
			z.State = Full
			z.WP = z.Capacity(t.L)
		default:
			z.State = ReadOnly
			z.WP = rng.Intn(z.Capacity(t.L) + 1)
		}
		if z.WP > 0 {
			z.Live = rng.Intn(z.WP + 1)
		}
	}
	return t
}

// TestPickRespectsRequest draws random tables and requests and checks what
// Pick hands out against the request and the table: a writable data zone
// on an allowed channel, never GC's zone to another writer, an empty zone
// only above the floor, the least worn empty zone of its channel, and
// needGC only when nothing was handed out.
func TestPickRespectsRequest(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	for run := 0; run < 3000; run++ {
		tab := randomTable(rng, testGeometry)
		r := Request{Hint: uint8(rng.Intn(5)), Channel: rng.Intn(testGeometry.Channels+1) - 1,
			MinEmpty: rng.Intn(6), ForGC: rng.Intn(4) == 0, MaxOpen: 1 + rng.Intn(8)}
		if rng.Intn(2) == 0 {
			r.Last = tab.Data()[rng.Intn(len(tab.Data()))]
		}
		empties := tab.CountState(Empty)
		z, needGC := tab.Pick(r)
		what := fmt.Sprintf("run %d, request %+v", run, r)
		if z == nil {
			if !needGC && !r.ForGC {
				// Pick gives nothing without asking for GC only for GC.
				t.Fatalf("%s: no zone and no GC asked", what)
			}
			if r.ForGC && empties > 0 && r.Channel < 0 {
				t.Fatalf("%s: GC got no zone with %d empty", what, empties)
			}
			continue
		}
		if needGC {
			t.Fatalf("%s: a zone and a GC request", what)
		}
		if !z.Writable(tab.L) || z.Meta {
			t.Fatalf("%s: handed out %s, not writable", what, z)
		}
		if r.Channel >= 0 && z.Channel != r.Channel {
			t.Fatalf("%s: handed out %s off channel %d", what, z, r.Channel)
		}
		if z.GC && z.State == Open && !r.ForGC {
			t.Fatalf("%s: GC's zone %s to another writer", what, z)
		}
		if z.State == Empty {
			if !r.ForGC && empties <= r.MinEmpty {
				t.Fatalf("%s: empty %s handed out with %d empty zones", what, z, empties)
			}
			if best := tab.EmptyOn(z.Channel); best.Erases != z.Erases {
				t.Fatalf("%s: %s handed out, %s is less worn", what, z, best)
			}
		}
	}
}

// TestAllocEmptyRoundRobin: with no die failed, successive new zones go to
// successive channels, and on each channel least worn first.
func TestAllocEmptyRoundRobin(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	tab := newTable(testGeometry)
	for _, z := range tab.Data() {
		z.Erases = rng.Intn(100)
	}
	want := 0
	for tab.CountState(Empty) > 0 {
		z := tab.AllocEmpty(-1)
		for tab.EmptyOn(want) == nil {
			want = (want + 1) % testGeometry.Channels
		}
		if z.Channel != want {
			t.Fatalf("zone %s on channel %d, want %d", z, z.Channel, want)
		}
		for _, o := range tab.Data() {
			if o.Channel == z.Channel && o.State == Empty && o.Erases < z.Erases {
				t.Fatalf("zone %s handed out before the less worn %s", z, o)
			}
		}
		z.State = Full
		want = (want + 1) % testGeometry.Channels
	}
	if z := tab.AllocEmpty(-1); z != nil {
		t.Fatalf("no empty zone left, got %s", z)
	}
}

// TestAllocEmptyFollowsWeights: once a die failed, new zones follow the
// allocator's weights (CDR: the victim channel's narrower zones come as
// often as the others', IDR: more often) and never an avoided channel.
func TestAllocEmptyFollowsWeights(t *testing.T) {
	g := testGeometry
	g.BlocksPerDie = 64
	for _, policy := range []reparo.Policy{reparo.HandlerCDR, reparo.HandlerIDR} {
		tab := newTable(g)
		tab.Failed[flash.DieAddr{Channel: 1, Die: 0}] = true
		tab.SetWeights(policy)
		tab.Avoid = []bool{false, false, false, true}
		per := make([]int, g.Channels)
		for i := 0; i < 60; i++ {
			z := tab.AllocEmpty(-1)
			if z == nil {
				t.Fatalf("%v: no zone after %d", policy, i)
			}
			per[z.Channel]++
			z.State = Full
		}
		if per[3] != 0 {
			t.Fatalf("%v: %d zones on the avoided channel 3", policy, per[3])
		}
		switch policy {
		case reparo.HandlerCDR:
			if per[1] < per[0]-1 || per[1] > per[0]+1 {
				t.Fatalf("CDR: zones per channel %v, the victim's should match", per)
			}
		case reparo.HandlerIDR:
			if per[1] <= per[0] {
				t.Fatalf("IDR: zones per channel %v, the victim's should be more", per)
			}
		}
	}
}

// TestVictim checks greedy against a brute-force minimum of the live
// fraction, and cost-benefit's preference of an old, fuller zone over a
// young, emptier one.
func TestVictim(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	now := time.Unix(1e9, 0)
	for run := 0; run < 500; run++ {
		tab := randomTable(rng, testGeometry)
		var want *Zone
		for _, z := range tab.Data() {
			c := z.Capacity(tab.L)
			if (z.State != Full && z.State != ReadOnly) || z.Writers > 0 || c == 0 || z.Live >= c {
				continue
			}
			if want == nil || float64(z.Live)/float64(c) < float64(want.Live)/float64(want.Capacity(tab.L)) {
				want = z
			}
		}
		if got := tab.Victim(false, now); got != want {
			t.Fatalf("run %d: greedy victim %v, want %v", run, got, want)
		}
	}
	tab := newTable(testGeometry)
	young, old := tab.Data()[0], tab.Data()[1]
	for _, z := range []*Zone{young, old} {
		z.State, z.WP = Full, z.Capacity(tab.L)
	}
	young.Live, young.LastWrite = young.WP/4, now.Add(-time.Second)
	old.Live, old.LastWrite = old.WP/2, now.Add(-time.Hour)
	if got := tab.Victim(false, now); got != young {
		t.Fatalf("greedy: %s, want the emptier %s", got, young)
	}
	if got := tab.Victim(true, now); got != old {
		t.Fatalf("cost-benefit: %s, want the older %s", got, old)
	}
	old.GCStuck = true
	if got := tab.Victim(true, now); got != young {
		t.Fatalf("cost-benefit with the old zone stuck: %s, want %s", got, young)
	}

	// After a die loss, a zone whose live pages fill its surviving dies
	// has nothing to give back, however empty its die set makes it look;
	// a zone with one dead page on good dies is the victim.
	tab = newTable(testGeometry)
	maimed, tight := tab.OnChannel(1, 3), tab.OnChannel(2, 3)
	tab.Failed[flash.DieAddr{Channel: 1, Die: maimed.Dies[0]}] = true
	for _, z := range []*Zone{maimed, tight} {
		z.State, z.WP = Full, z.Capacity(tab.L)
	}
	maimed.Live = tab.ResetCapacity(maimed)
	tight.Live = tight.WP - 1
	if maimed.Live >= maimed.WP {
		t.Fatalf("the failed die did not shrink %s: %d", maimed, maimed.Live)
	}
	if got := tab.Victim(false, now); got != tight {
		t.Fatalf("greedy after a die loss: %s, want %s", got, tight)
	}
	if got := tab.Victim(true, now); got != tight {
		t.Fatalf("cost-benefit after a die loss: %s, want %s", got, tight)
	}
}

// TestLendRelease: lent zones are empty data zones off the avoided channels
// while others have some, Meta and Full until released; a request the
// empty zones cannot hold lends nothing.
func TestLendRelease(t *testing.T) {
	tab := newTable(testGeometry)
	per := tab.Data()[0].Capacity(tab.L) + 1 // laid out as metadata: all pages
	lent, ok := tab.Lend(2*per, map[int]bool{0: true, 1: true})
	if !ok || len(lent) != 2 {
		t.Fatalf("lend: %v %v", lent, ok)
	}
	for _, z := range lent {
		if z.Channel < 2 || !z.Meta || !z.Body || z.State != Full {
			t.Fatalf("lent %s (meta %v body %v)", z, z.Meta, z.Body)
		}
		if p, _ := tab.Pick(Request{Channel: z.Channel, MaxOpen: 8}); p == z {
			t.Fatalf("lent zone %s handed to a writer", z)
		}
	}
	lent[0].WP = 3
	tab.Release(lent)
	if lent[0].State != ReadOnly || lent[0].Meta || !lent[0].Reclaimable() {
		t.Fatalf("released %s with pages: want read-only and reclaimable", lent[0])
	}
	if lent[1].State != Empty || lent[1].Meta {
		t.Fatalf("released %s without pages: want empty", lent[1])
	}
	before := tab.CountState(Empty)
	if lent, ok := tab.Lend(1<<20, nil); ok || lent != nil || tab.CountState(Empty) != before {
		t.Fatalf("an impossible body lent %d zones (ok %v), %d empty left of %d", len(lent), ok, tab.CountState(Empty), before)
	}
}

// TestRebuild derives zones from written-page counts, die masks, journaled
// states and failed dies, case by case.
func TestRebuild(t *testing.T) {
	g := testGeometry
	P := g.PagesPerBlock
	type tc struct {
		name    string
		written []int // per die of the zone's mask
		mask    uint64
		state   State // journaled, Empty: none
		failed  int   // a failed die, -1: none
		want    string
	}
	cases := []tc{
		{"untouched", []int{0, 0, 0, 0}, 0xf, Empty, -1, "empty wp=0 dies=[0 1 2 3]"},
		{"prefix", []int{2, 2, 1, 1}, 0xf, Empty, -1, "open wp=6 dies=[0 1 2 3]"},
		{"ragged", []int{1, 0, 1, 0}, 0xf, Empty, -1, "read-only wp=2 dies=[0 1 2 3]"},
		{"full with P2L", []int{P, P, P, P}, 0xf, Empty, -1, "full wp=28 dies=[0 1 2 3] p2l"},
		{"narrow", []int{3, 3, 0, 0}, 0x3, Empty, -1, "open wp=6 dies=[0 1]"},
		{"journaled read-only", []int{1, 1, 1, 1}, 0xf, ReadOnly, -1, "read-only wp=4 dies=[0 1 2 3]"},
		{"on a failed die", []int{1, 1, 1, 1}, 0xf, Empty, 2, "read-only wp=4 dies=[0 1 2 3]"},
		{"empty on a failed die", []int{0, 0, 0, 0}, 0xf, Empty, 2, "empty wp=0 dies=[0 1 3]"},
		{"journaled offline", []int{0, 0, 0, 0}, 0xf, Offline, -1, "offline wp=0 dies=[0 1 2 3]"},
	}
	for _, c := range cases {
		tab := newTable(g)
		z := tab.Data()[0]
		for i, d := range onflash.DiesOf(c.mask) {
			tab.Blocks[BlockIndex(g, tab.L.ZoneBlockAddr(z.ID, d))].WrittenPage = c.written[i]
		}
		if c.failed >= 0 {
			tab.Failed[flash.DieAddr{Channel: z.Channel, Die: c.failed}] = true
		}
		masks, states := map[int]uint64{}, map[int]State{}
		if c.mask != tab.L.FullDieMask() {
			masks[z.ID] = c.mask
		}
		if c.state != Empty {
			states[z.ID] = c.state
		}
		tab.Rebuild(masks, states)
		got := fmt.Sprintf("%s wp=%d dies=%v", z.State, z.WP, z.Dies)
		if z.P2L {
			got += " p2l"
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if z.WP > 0 && (len(z.Owners) != z.Capacity(tab.L) || len(z.OwnersKnown) != len(z.Owners)) {
			t.Errorf("%s: owner lists of %d, %d for capacity %d", c.name, len(z.Owners), len(z.OwnersKnown), z.Capacity(tab.L))
		}
	}
}

func TestStateString(t *testing.T) {
	var names []string
	for s := State(0); s <= NumStates; s++ {
		names = append(names, s.String())
	}
	if got, want := strings.Join(names, ","), "empty,open,full,read-only,offline,zonestate(5)"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// TestOpenFixups: the zone decisions taken at open after replay (LendBody,
// CountLive, Settle).
func TestOpenFixups(t *testing.T) {
	tb := newTable(testGeometry)
	d := tb.Data()
	// A body in two copies over three zones.
	body := &onflash.CheckpointBody{}
	body.Copies[0] = []onflash.BodyRun{{Zone: d[0].ID, Mask: 0b11, Pages: 5}, {Zone: d[1].ID, Mask: 0b1111, Pages: 2}}
	body.Copies[1] = []onflash.BodyRun{{Zone: d[2].ID, Mask: 0b101, Pages: 5}}
	d[0].State, d[0].Unsealed, d[0].P2L = Open, true, true
	lent := tb.LendBody(body)
	if len(lent) != 3 || lent[0] != d[0] || lent[2] != d[2] {
		t.Fatalf("lent %v", lent)
	}
	for i, want := range []struct {
		dies []int
		wp   int
	}{{[]int{0, 1}, 5}, {[]int{0, 1, 2, 3}, 2}, {[]int{0, 2}, 5}} {
		z := d[i]
		if !z.Meta || !z.Body || z.State != Full || z.WP != want.wp || z.Unsealed || z.P2L || fmt.Sprint(z.Dies) != fmt.Sprint(want.dies) {
			t.Fatalf("lent zone %d: %+v", i, z)
		}
	}
	if tb.LendBody(nil) != nil {
		t.Fatal("no body lent zones")
	}
	// Zone 3: open with live pages; 4: open, unmapped (an old body); 5:
	// open, unmapped but unsealed (recovered appends); 6: full, unsealed.
	d[3].State, d[4].State, d[5].State, d[6].State = Open, Open, Open, Full
	d[5].Unsealed, d[6].Unsealed = true, true
	m := &extmap.Map{Exts: []extmap.Extent{{Zone: d[3].ID, N: 3}, {Zone: d[6].ID, N: 2}, {Zone: d[3].ID, N: 1}}}
	tb.CountLive([]*extmap.Map{m})
	if d[3].Live != 4 || d[6].Live != 2 || d[4].Live != 0 {
		t.Fatalf("live %d %d %d", d[3].Live, d[6].Live, d[4].Live)
	}
	tb.Settle()
	if d[3].State != Open || d[4].State != ReadOnly || d[5].State != Open || d[6].State != Full || d[6].Unsealed || !d[5].Unsealed {
		t.Fatalf("settled: %v %v %v %v/%t", d[3].State, d[4].State, d[5].State, d[6].State, d[6].Unsealed)
	}
	// Lent body zones are metadata: never made read-only by Settle.
	if d[0].State != Full {
		t.Fatalf("body zone settled to %v", d[0].State)
	}
}
