package wear

import (
	"errors"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

// linePlacer walks servers 1..n starting at (id-1) mod n: o1 -> n1 n2 n3,
// o2 -> n2 n3 n4, and so on, so golden output is easy to read.
type linePlacer struct{ n int }

func (p linePlacer) Walk(id ObjectID, visit func(base.NodeID) bool) {
	start := int((uint64(id) + uint64(p.n) - 1) % uint64(p.n))
	for i := 0; i < p.n; i++ {
		if !visit(base.NodeID((start+i)%p.n + 1)) {
			return
		}
	}
}

func TestStates(t *testing.T) {
	for _, tc := range []struct {
		s            State
		name         string
		intermediate bool
		target, src  Redundancy
	}{
		{StateREP, "REP", false, REP, REP},
		{StateEC, "EC", false, EC, EC},
		{StateLateREP, "late-REP", true, REP, EC},
		{StateLateEC, "late-EC", true, EC, REP},
		{StateREPEWO, "REP-EWO", true, REP, REP},
		{StateECEWO, "EC-EWO", true, EC, EC},
	} {
		if tc.s.String() != tc.name || tc.s.Intermediate() != tc.intermediate ||
			tc.s.Target() != tc.target || tc.s.Source() != tc.src || !tc.s.Valid() {
			t.Errorf("%v: name %q intermediate %v target %v source %v", tc.s, tc.s.String(),
				tc.s.Intermediate(), tc.s.Target(), tc.s.Source())
		}
	}
	if State(0).Valid() || numStates.Valid() {
		t.Fatal("invalid states accepted")
	}
	if len(States()) != int(numStates)-1 {
		t.Fatal("States() misses one")
	}
}

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		r     Redundancy
		nodes []base.NodeID
		ok    bool
	}{
		{"rep", REP, []base.NodeID{1, 2, 3}, true},
		{"ec", EC, []base.NodeID{1, 2, 3, 4, 5, 6}, true},
		{"rep short", REP, []base.NodeID{1, 2}, false},
		{"rep long", REP, []base.NodeID{1, 2, 3, 4}, false},
		{"ec twice", EC, []base.NodeID{1, 2, 3, 4, 5, 1}, false},
		{"zero node", REP, []base.NodeID{1, 0, 3}, false},
		{"no redundancy", 0, []base.NodeID{1, 2, 3}, false},
	} {
		l, err := NewLayout(tc.r, tc.nodes)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, %v", tc.name, l, err)
		}
	}
	l := MustLayout(EC, 1, 2, 3, 4, 5, 6)
	if l.String() != "EC[n1 n2 n3 n4 n5 n6]" || l.Index(4) != 3 || l.Contains(7) {
		t.Fatalf("layout %v", l)
	}
	if m := l.With(2, 9); m.Node(2) != 9 || l.Node(2) != 3 {
		t.Fatal("With changed the original")
	}
	if l.With(2, 1).Check() == nil {
		t.Fatal("duplicate accepted by Check")
	}
	if EC.PartBytes(10) != 3 || REP.PartBytes(10) != 10 {
		t.Fatal("part bytes")
	}
}

func TestParse(t *testing.T) {
	for _, m := range Modes() {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("raid"); !base.IsInvalidArgument(err) {
		t.Fatal("unknown mode accepted")
	}
	if r, err := ParseRedundancy("EC"); err != nil || r != EC {
		t.Fatal("EC")
	}
	if _, err := ParseRedundancy("raid6"); !base.IsInvalidArgument(err) {
		t.Fatal("unknown redundancy accepted")
	}
}

func TestOptions(t *testing.T) {
	o, err := Options{}.WithDefaults()
	if err != nil || o.Mode != ModeChameleon || o.Initial != EC || o.PagesPerBlock != 64 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	if o, _ := (Options{Mode: ModeREPEC}).WithDefaults(); o.Initial != REP {
		t.Fatal("rep+ec starts as REP")
	}
	for name, bad := range map[string]Options{
		"rep with ec":    {Mode: ModeREP, Initial: EC},
		"ec with rep":    {Mode: ModeEC, Initial: REP},
		"unknown mode":   {Mode: 99},
		"bad initial":    {Initial: 7},
		"negative sigma": {SigmaARPT: -1},
		"both forms":     {SigmaHCDS: 100, SigmaHCDSRatio: 0.05},
		"ratio range":    {SigmaARPTRatio: 1000},
		"hot fraction":   {HotFraction: 2},
		"utilization":    {MaxUtilization: 1.5},
		"remaps":         {MaxRemapsPerEpoch: -3},
		"page":           {PageBytes: 100},
	} {
		if _, err := bad.WithDefaults(); !base.IsInvalidArgument(err) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
}

func TestEntryEncoding(t *testing.T) {
	entries := []Entry{
		{Object: 1, State: StateREP, Dst: MustLayout(REP, 1, 2, 3), Epoch: 0},
		{Object: 1 << 60, State: StateEC, Dst: MustLayout(EC, 10000, 9999, 3, 4, 5, 16383), Epoch: 1 << 31},
		{Object: 7, State: StateLateREP, Src: MustLayout(EC, 1, 2, 3, 4, 5, 6), Dst: MustLayout(REP, 7, 8, 9), Epoch: 4},
		{Object: 8, State: StateLateEC, Src: MustLayout(REP, 1, 2, 3), Dst: MustLayout(EC, 16000, 16001, 16002, 16003, 16004, 16005), Epoch: 4},
		{Object: 9, State: StateREPEWO, Src: MustLayout(REP, 1, 2, 3), Dst: MustLayout(REP, 1, 2, 4), Epoch: 5},
		{Object: 10, State: StateECEWO, Src: MustLayout(EC, 1, 2, 3, 4, 5, 6), Dst: MustLayout(EC, 1, 2, 3, 4, 5, 7), Epoch: 5},
	}
	for _, e := range entries {
		b := e.AppendBinary(nil)
		if e.Object < 1<<32 && len(b) > EntryMaxBytes16K {
			t.Errorf("%v: %d bytes > %d", e, len(b), EntryMaxBytes16K)
		}
		got, err := DecodeEntry(b)
		if err != nil || got != e {
			t.Fatalf("round trip of %v: %v, %v", e, got, err)
		}
		// Every single-bit flip and every truncation is a corruption.
		for bit := 0; bit < 8*len(b); bit++ {
			c := append([]byte(nil), b...)
			c[bit/8] ^= 1 << (bit % 8)
			if _, err := DecodeEntry(c); !base.IsCorruption(err) {
				t.Fatalf("%v: flip of bit %d: %v", e, bit, err)
			}
		}
		for n := 0; n < len(b); n++ {
			if _, err := DecodeEntry(b[:n]); !base.IsCorruption(err) {
				t.Fatalf("%v: truncated to %d: %v", e, n, err)
			}
		}
	}
}

func TestEntryCheck(t *testing.T) {
	for name, e := range map[string]Entry{
		"no state":          {Object: 1, Dst: MustLayout(REP, 1, 2, 3)},
		"REP with EC dst":   {Object: 1, State: StateREP, Dst: MustLayout(EC, 1, 2, 3, 4, 5, 6)},
		"REP with a source": {Object: 1, State: StateREP, Src: MustLayout(REP, 1, 2, 3), Dst: MustLayout(REP, 1, 2, 3)},
		"late-REP no src":   {Object: 1, State: StateLateREP, Dst: MustLayout(REP, 1, 2, 3)},
		"late-REP REP src":  {Object: 1, State: StateLateREP, Src: MustLayout(REP, 4, 5, 6), Dst: MustLayout(REP, 1, 2, 3)},
		"EC-EWO REP dst":    {Object: 1, State: StateECEWO, Src: MustLayout(EC, 1, 2, 3, 4, 5, 6), Dst: MustLayout(REP, 1, 2, 3)},
	} {
		if err := e.Check(); !errors.Is(err, base.ErrAssertionFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestTableCompaction is Figure 3: o0 becomes late-REP in epoch 0, is not
// written until epoch 3, and in epoch 4 is cold again: its log holds both
// rows, compaction keeps the epoch-4 row only, and since that row is the
// default (EC on its default placement) no row remains at all.
func TestTableCompaction(t *testing.T) {
	b, err := New(Options{Mode: ModeChameleon}, linePlacer{n: 8})
	if err != nil {
		t.Fatal(err)
	}
	id := ObjectID(1)
	p, err := b.PlanWrite(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(p, 1<<20, 1<<20); err != nil {
		t.Fatal(err)
	}
	if b.Compact() != 1 || b.Table().Rows() != 0 {
		t.Fatalf("a new object on its default placement has a row: %d", b.Table().Rows())
	}
	o := b.lookup(id)
	src := o.entry.Dst
	b.change(o, Entry{Object: id, State: StateLateREP, Src: src, Dst: MustLayout(REP, 6, 7, 8), Epoch: 0})
	b.epoch = 4
	b.cancel(o, b.newEstimate())
	h := b.Table().History(id)
	if len(h) != 2 || h[0].Entry.State != StateLateREP || h[1].Entry.State != StateEC || h[1].Entry.Epoch != 4 ||
		h[1].Entry.Dst != src {
		t.Fatalf("history %v", h)
	}
	if n := b.Compact(); n != 2 || b.Table().Rows() != 0 || len(b.Table().Log()) != 0 {
		t.Fatalf("compaction folded %d, %d rows left", n, b.Table().Rows())
	}
	// A row that differs from the default survives compaction, latest only.
	b.change(o, Entry{Object: id, State: StateLateREP, Src: src, Dst: MustLayout(REP, 6, 7, 8), Epoch: 5})
	b.change(o, Entry{Object: id, State: StateREP, Dst: MustLayout(REP, 6, 7, 8), Epoch: 6})
	b.Compact()
	if r, ok := b.Table().Row(id); !ok || r.State != StateREP || r.Epoch != 6 || b.Table().Rows() != 1 {
		t.Fatalf("row %v %v", r, ok)
	}
	b.Remove(id)
	b.Compact()
	if b.Table().Rows() != 0 {
		t.Fatal("removed object keeps its row")
	}
}

// TestTopK checks the bounded selection against a full sort.
func TestTopK(t *testing.T) {
	seed := testseed.Seed(t, "WEAR_SEED")
	rng := rand.New(rand.NewSource(seed))
	for run := 0; run < 200; run++ {
		n := rng.Intn(300)
		vals := make([]int, n)
		idx := make([]int32, n)
		for i := range vals {
			vals[i] = rng.Intn(20)
			idx[i] = int32(i)
		}
		before := func(x, y int32) bool {
			if vals[x] != vals[y] {
				return vals[x] > vals[y]
			}
			return x < y
		}
		full := topK(idx, n, before)
		k := rng.Intn(n + 2)
		got := topK(idx, k, before)
		if want := full[:min(k, n)]; !slices.Equal(got, want) {
			t.Fatalf("seed %d: top %d of %v = %v, want %v", seed, k, vals, got, want)
		}
		for i := range idx {
			if idx[i] != int32(i) {
				t.Fatal("topK changed its input")
			}
		}
	}
}

// TestExtremaTree checks the segment tree against a scan.
func TestExtremaTree(t *testing.T) {
	seed := testseed.Seed(t, "WEAR_SEED")
	rng := rand.New(rand.NewSource(seed))
	for run := 0; run < 50; run++ {
		n := 1 + rng.Intn(40)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = float64(rng.Intn(10))
		}
		tr := newExtremaTree(vals)
		masked := make([]bool, n)
		for step := 0; step < 200; step++ {
			i := rng.Intn(n)
			if rng.Intn(3) == 0 {
				masked[i] = !masked[i]
				tr.mask(i, masked[i])
			} else {
				vals[i] = float64(rng.Intn(10))
				tr.set(i, vals[i])
			}
			lo, hi := -1, -1
			for j := range vals {
				if masked[j] {
					continue
				}
				if lo < 0 || vals[j] < vals[lo] {
					lo = j
				}
				if hi < 0 || vals[j] > vals[hi] {
					hi = j
				}
			}
			gotLo, okLo := tr.min()
			gotHi, okHi := tr.max()
			if (lo < 0) == okLo || (hi < 0) == okHi || (okLo && gotLo != lo) || (okHi && gotHi != hi) {
				t.Fatalf("seed %d: %v masked %v: min %d (%v) max %d (%v), want %d %d", seed, vals, masked, gotLo, okLo, gotHi, okHi, lo, hi)
			}
		}
	}
}

// TestPartPagesPerWrite is W_t of eq. 2 per write for each kind of part: a
// parity shard is programmed once per stripe row a write touches, so a
// one-page EC update costs each parity shard a page, as it costs each
// copy of REP.
func TestPartPagesPerWrite(t *testing.T) {
	const page = 4096
	for _, c := range []struct {
		name     string
		r        Redundancy
		p        int
		perWrite float64
		size     int64
		want     float64
	}{
		{"REP copy, 3 pages", REP, 1, 3 * page, 128 << 10, 3},
		{"REP copy, under a page", REP, 0, 100, 128 << 10, 1},
		{"EC data shard, 4 pages", EC, 2, 4 * page, 128 << 10, 1},
		{"EC data shard, 1 page", EC, 0, page, 128 << 10, 0.25},
		{"EC parity, 1 page", EC, 4, page, 128 << 10, 1},
		{"EC parity, 5 pages at a random offset", EC, 5, 5 * page, 128 << 10, 2},
		{"EC parity, a whole 12-page object: its 3 rows", EC, 4, 12 * page, 48 << 10, 3},
	} {
		if got := partPagesPerWrite(c.r, c.p, c.perWrite, c.size, page); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %g pages, want %g", c.name, got, c.want)
		}
	}
}
