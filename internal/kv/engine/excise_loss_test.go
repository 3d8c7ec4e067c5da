package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// openFilled opens an engine on fs with n rows (fillSM), closed when the
// test ends.
func openFilled(t *testing.T, fs vfs.FS, n int) *StateMachine {
	t.Helper()
	sm, err := Open(fs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	fillSM(t, sm, n)
	return sm
}

// TestExciseNextToDamageTakesTheDamageAlong: a patch's excise would cut a
// table of another level that is damaged right where Pebble seeks for the
// bound of its remainder (Pebble then drops the whole remainder: every row
// of that table below the span). IngestRanges does not excise: it names
// the span and the damaged block's range to patch again, and loses
// nothing; the patch of that union then goes in and loses nothing either.
// (Found by kv-recovery-latency's persistent flips at UBER 1e-7: excises
// lost remainders that were most of a shard on several replicas at once,
// and a shard stayed unreadable for the rest of the run.)
func TestExciseNextToDamageTakesTheDamageAlong(t *testing.T) {
	sm, top, bottom := openRewritten(t)
	if _, err := sm.corruptBlockInFile(top, UserKey(key(1150)), 0.5); err != nil {
		t.Fatal(err)
	}
	// The table below it (every key, compacted) is damaged far above the
	// span, where its nearest damaged run above the span is. Pebble's
	// excise seeks only next to the span (the last key below it, the
	// first at or above its end, in each table it cuts): the span does
	// not grow over that run. (It did: under persistent flips every cut
	// table had a run somewhere, and patches grew to most of a shard.)
	if _, err := sm.corruptBlockInFile(bottom, UserKey(key(1500)), 0.5); err != nil {
		t.Fatal(err)
	}
	span := Range{Start: key(1150), End: key(1160)}
	var rows []*kvpb.KeyValue
	for i := 1150; i < 1160; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: newValue(i)})
	}
	var held, kept []Range
	hold := func(around []Range) func([]Range) {
		held = append(held, around...)
		return func(keep []Range) { kept = append(kept, keep...) }
	}
	err := sm.IngestRanges([]Range{span}, rows, 10, 1, hold)
	t.Logf("ingest: %v", err)
	var el *ExciseLossError
	if !errors.As(err, &el) {
		t.Fatalf("want an ExciseLossError (the span next to the damage), got %v", err)
	}
	union := Range{Start: key(1150), End: key(1160)}
	for _, l := range el.Lost {
		if bytes.Compare(l.Start, union.Start) < 0 {
			union.Start = l.Start
		}
		if bytes.Compare(l.End, union.End) > 0 {
			union.End = l.End
		}
	}
	// Only the damaged block's range and the span: not the tables' rows
	// beyond.
	if bytes.Compare(union.Start, key(1100)) < 0 || bytes.Compare(union.End, key(1200)) > 0 {
		t.Fatalf("lost %v: more than the span and the damaged block", el.Lost)
	}
	// What it cannot read stays refused (held, and kept when released):
	// the span and the damaged block; the rows between them are intact
	// and stay readable (to clients, and to peers' patches).
	if !keyspan.Covers(el.Refused, span) || !keyspan.Covers(kept, span) {
		t.Fatalf("the span %v is not kept refused (refused %v, kept %v)", span, el.Refused, kept)
	}
	for _, l := range el.Refused {
		if !slicesContain(kept, l) {
			t.Fatalf("refused range %v is not kept refused (kept %v)", l, kept)
		}
	}
	if bytes.Compare(union.Start, key(1150)) >= 0 || union.Contains(key(1500)) {
		t.Fatalf("lost %v, kept %v: want the span grown over the damaged block at its edge, not over the run far from it", el.Lost, kept)
	}
	// Nothing outside it was lost: every row of the table reads back.
	check := func(lo, hi int) {
		t.Helper()
		got, _, err := Scan(sm.db, key(lo), key(hi), 0)
		if err != nil || len(got) != hi-lo {
			t.Fatalf("rows [%d, %d): %d, %v", lo, hi, len(got), err)
		}
	}
	var first, last int
	fmt.Sscanf(string(union.Start), "key-%05d", &first)
	fmt.Sscanf(string(union.End), "key-%05d", &last)
	check(1000, first)
	check(last+1, 1300)
	// The union's patch goes in whole: its excise seeks in healthy blocks.
	rows = rows[:0]
	for i := 1000; i < 1300; i++ {
		if union.Contains(key(i)) {
			rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: newValue(i)})
		}
	}
	if err := sm.IngestRanges([]Range{union}, rows, 11, 1, nil); err != nil {
		t.Fatalf("patch of %v: %v", union, err)
	}
	check(1000, 1300)
}

func key(i int) []byte      { return []byte(fmt.Sprintf("key-%05d", i)) }
func newValue(i int) []byte { return []byte(fmt.Sprintf("new-%05d-%0300d", i, i)) }

// openRewritten opens an engine whose 2000 rows (key) are compacted into
// the bottom level, with keys 1000-1299 rewritten (newValue) in one L0 table
// above them; it returns the paths of the L0 table and of a bottom table
// holding those keys.
func openRewritten(t *testing.T) (sm *StateMachine, top, bottom string) {
	t.Helper()
	fs := vfs.NewMem()
	sm = openFilled(t, fs, 2000)
	if err := sm.db.Compact(context.Background(), []byte{0}, UserEnd, false); err != nil {
		t.Fatal(err)
	}
	for i := 1000; i < 1300; i++ {
		if err := sm.db.Set(UserKey(key(i)), newValue(i), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := sm.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := sm.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	path := func(level int) string {
		var p string
		for _, tbl := range levels[level] {
			p = fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum)))
		}
		return p
	}
	top, bottom = path(0), path(len(levels)-1)
	if top == "" || bottom == "" {
		t.Fatalf("want an L0 table over a bottom level: %v", levels)
	}
	return sm, top, bottom
}

func slicesContain(rs []Range, r Range) bool {
	for _, q := range rs {
		if q.String() == r.String() {
			return true
		}
	}
	return false
}

// TestPatchThatDoesNotReadBackIsPatchedAgain: the table a patch ingests is
// damaged before the patch is read back (a flip in the fresh table). The
// span is installed and the entry applied, and IngestRanges names the
// damaged block's keys as lost, to be patched again while still refused,
// instead of an error that makes the replica rebuild its whole state from
// a peer, and instead of the whole span (a large patch, at UBER 1e-7, met
// a flip in almost every read back and was asked for again and again).
func TestPatchThatDoesNotReadBackIsPatchedAgain(t *testing.T) {
	fs := vfs.NewMem()
	sm := openFilled(t, fs, 2000)
	damaged := 0
	sm.beforeReadBack = func(lo, hi []byte) {
		levels, err := sm.db.SSTables()
		if err != nil {
			t.Fatal(err)
		}
		// The patch's table is the one inside the span.
		for _, lvl := range levels {
			for _, tbl := range lvl {
				if bytes.Compare(tbl.Smallest.UserKey, lo) < 0 || bytes.Compare(tbl.Largest.UserKey, hi) >= 0 {
					continue
				}
				if _, err := sm.corruptBlockInFile(fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum))), UserKey(key(1150)), 0.5); err != nil {
					t.Fatal(err)
				}
				damaged++
			}
		}
	}
	value := func(i int) []byte { return []byte(fmt.Sprintf("patched-%05d-%0300d", i, i)) }
	var rows []*kvpb.KeyValue
	for i := 1100; i < 1200; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: value(i)})
	}
	span := Range{Start: key(1100), End: key(1200)}
	err := sm.IngestRanges([]Range{span}, rows, 10, 1, nil)
	t.Logf("ingest: %v", err)
	if damaged != 1 {
		t.Fatalf("the read-back hook ran %d times", damaged)
	}
	var el *ExciseLossError
	if !errors.As(err, &el) {
		t.Fatalf("want an ExciseLossError naming the damaged block, got %v", err)
	}
	named := false
	for _, l := range el.Lost {
		named = named || l.Contains(key(1150))
		if !span.Includes(l) || l.Includes(span) {
			t.Fatalf("lost %v: want the damaged block's keys, inside the span %v and less than all of it", el.Lost, span)
		}
	}
	if !named {
		t.Fatalf("lost %v does not name the damaged row key-01150", el.Lost)
	}
	if st := sm.Applied(); st.Index != 10 {
		t.Fatalf("applied index %d, want the patch entry's 10", st.Index)
	}
	// The rest of the span is in: every row outside the lost ranges reads
	// back as patched.
	outside := 0
	for i := 1100; i < 1200; i++ {
		lost := false
		for _, l := range el.Lost {
			lost = lost || l.Contains(key(i))
		}
		if lost {
			continue
		}
		got, _, err := Scan(sm.db, key(i), append(key(i), 0), 0)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0].Value, value(i)) {
			t.Fatalf("row %d outside the lost ranges: %v, %v", i, got, err)
		}
		outside++
	}
	if outside == 0 {
		t.Fatalf("no row of the span outside the lost ranges %v", el.Lost)
	}
	// The next patch of what was lost (as the replica proposes it)
	// installs and reads back, and the whole span reads as patched.
	sm.beforeReadBack = nil
	var again []*kvpb.KeyValue
	for _, kv := range rows {
		for _, l := range el.Lost {
			if l.Contains(kv.Key) {
				again = append(again, kv)
			}
		}
	}
	if err := sm.IngestRanges(el.Lost, again, 11, 1, nil); err != nil {
		t.Fatalf("second patch: %v", err)
	}
	got, _, err := Scan(sm.db, span.Start, span.End, 0)
	if err != nil || len(got) != len(rows) {
		t.Fatalf("patched span: %d rows, %v", len(got), err)
	}
	for i, kv := range got {
		if !bytes.Equal(kv.Value, rows[i].Value) {
			t.Fatalf("row %q: %q", kv.Key, kv.Value)
		}
	}
}

// TestWholeSpanPatchPastDamageAtBothEnds: a replica that lost its whole
// shard is patched with every row while its one table (which also holds
// both copies of the applied record) is damaged in the blocks at either
// end of the user keys, right where an excise of the user key space alone
// would seek for the bounds of the table's remainders. The patch goes in
// (the table is excised whole, with the applied record), every row reads
// back, and the applied record names the patch's entry.
func TestWholeSpanPatchPastDamageAtBothEnds(t *testing.T) {
	fs := vfs.NewMem()
	sm := openFilled(t, fs, 2000)
	if err := sm.db.Compact(context.Background(), []byte{0}, []byte{0x7f}, false); err != nil {
		t.Fatal(err)
	}
	levels, err := sm.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, lvl := range levels {
		for _, tbl := range lvl {
			paths = append(paths, fs.PathJoin("sm", fmt.Sprintf("%06d.sst", uint64(tbl.BackingSSTNum))))
		}
	}
	if len(paths) != 1 {
		t.Fatalf("want one table after the compaction, have %v", paths)
	}
	for _, i := range []int{0, 1999} {
		if _, err := sm.corruptBlockInFile(paths[0], UserKey(key(i)), 0.5); err != nil {
			t.Fatal(err)
		}
	}
	var rows []*kvpb.KeyValue
	for i := 0; i < 2000; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: []byte(fmt.Sprintf("patched-%05d", i))})
	}
	if err := sm.IngestRanges([]Range{{}}, rows, 5000, 7, nil); err != nil {
		t.Fatalf("patch of the whole shard: %v", err)
	}
	got, _, err := Scan(sm.db, nil, nil, 0)
	if err != nil || len(got) != 2000 {
		t.Fatalf("after the patch: %d rows, %v", len(got), err)
	}
	for i, kv := range got {
		if string(kv.Value) != fmt.Sprintf("patched-%05d", i) {
			t.Fatalf("row %d: %q", i, kv.Value)
		}
	}
	st, err := ReadApplied(sm.db)
	if err != nil || st.Index != 5000 || st.Term != 7 {
		t.Fatalf("applied record %+v, %v", st, err)
	}
}

// TestExciseFailureNobodyLocatesPatchesTheSpanFirst: a patch's excise fails
// on damage that no isolation finds afterwards (every data block of the
// tables it cuts verifies: a flip in the excise's own read). Nothing was
// excised, so only the span is named to patch again, not every row of the
// tables it cuts (one table of the whole shard, here: each such failure
// made the whole shard unreadable until its patch); the same span failing
// so again takes the tables' rows around it along; a patch that goes in
// loses nothing.
func TestExciseFailureNobodyLocatesPatchesTheSpanFirst(t *testing.T) {
	fs := vfs.NewMem()
	sm := openFilled(t, fs, 2000)
	if err := sm.db.Compact(context.Background(), []byte{0}, UserEnd, false); err != nil {
		t.Fatal(err)
	}
	span := Range{Start: key(1100), End: key(1110)}
	var rows []*kvpb.KeyValue
	for i := 1100; i < 1110; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: []byte(fmt.Sprintf("patched-%05d", i))})
	}
	fail := true
	sm.exciseFault = func(lo, hi []byte) error {
		if fail {
			return base.CorruptionErrorf("pebble: file 000999: block 0/100: checksum mismatch (injected)")
		}
		return nil
	}
	lostOf := func(index uint64) []Range {
		t.Helper()
		err := sm.IngestRanges([]Range{span}, rows, index, 1, nil)
		var el *ExciseLossError
		if !errors.As(err, &el) {
			t.Fatalf("patch %d: want an ExciseLossError, got %v", index, err)
		}
		return el.Lost
	}
	if lost := lostOf(10); len(lost) != 1 || !lost[0].Equal(span) {
		t.Fatalf("first failure lost %v, want only the span %v", lost, span)
	}
	// Another span failing so in between does not make the first one's
	// next failure a first again.
	other := Range{Start: key(1500), End: key(1510)}
	if err := sm.IngestRanges([]Range{other}, nil, 11, 1, nil); err == nil {
		t.Fatal("the excise of another span did not fail")
	}
	lost := lostOf(12)
	if !keyspan.Covers(lost, Range{Start: key(0), End: key(2000)}) {
		t.Fatalf("second failure of the same span lost %v, want the cut table's rows around it too", lost)
	}
	// Nothing was excised either time: every row is as it was.
	got, _, err := Scan(sm.db, nil, nil, 0)
	if err != nil || len(got) != 2000 {
		t.Fatalf("after failed excises: %d rows, %v", len(got), err)
	}
	fail = false
	if err := sm.IngestRanges([]Range{span}, rows, 13, 1, nil); err != nil {
		t.Fatalf("patch that goes in: %v", err)
	}
	got, _, err = Scan(sm.db, span.Start, span.End, 0)
	if err != nil || len(got) != len(rows) || string(got[0].Value) != "patched-01100" {
		t.Fatalf("patched span: %v, %v", got, err)
	}
}

// TestExciseGrowsOverEachDamagedBlockItsSeeksMeet: the span grown over the
// damaged block next to it has, at its new edge, a damaged block of
// another table the excise cuts (where Pebble would seek next). The span
// grows over that one too, and only as far: one run per seek that fails.
func TestExciseGrowsOverEachDamagedBlockItsSeeksMeet(t *testing.T) {
	sm, top, bottom := openRewritten(t)
	if _, err := sm.corruptBlockInFile(top, UserKey(key(1150)), 0.5); err != nil {
		t.Fatal(err)
	}
	runs, _, err := IsolateBlocks(sm.fs, top, sm.opts.MakeReaderOptions(), nil, nil)
	if err != nil || len(runs) != 1 {
		t.Fatalf("isolate the top table: %v, %v", runs, err)
	}
	// The last key below the top run: where the grown span's excise
	// seeks in the bottom table. Damage it there.
	below := 1149
	for bytes.Compare(UserKey(key(below)), runs[0].Start) >= 0 {
		below--
	}
	if _, err := sm.corruptBlockInFile(bottom, UserKey(key(below)), 0.5); err != nil {
		t.Fatal(err)
	}
	span := Range{Start: key(1150), End: key(1160)}
	var rows []*kvpb.KeyValue
	for i := 1150; i < 1160; i++ {
		rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: newValue(i)})
	}
	err = sm.IngestRanges([]Range{span}, rows, 10, 1, nil)
	t.Logf("ingest: %v", err)
	var el *ExciseLossError
	if !errors.As(err, &el) || len(el.Lost) != 1 {
		t.Fatalf("want an ExciseLossError naming one range, got %v", err)
	}
	union := el.Lost[0]
	if !union.Contains(key(below)) || bytes.Compare(union.Start, key(1050)) < 0 || bytes.Compare(union.End, key(1200)) > 0 {
		t.Fatalf("lost %v: want the span grown over the top table's damaged block and the bottom table's next to it (key %d), no further", el.Lost, below)
	}
	// The union's patch goes in whole: its excise seeks in healthy blocks.
	rows = rows[:0]
	for i := 1000; i < 1300; i++ {
		if union.Contains(key(i)) {
			rows = append(rows, &kvpb.KeyValue{Key: key(i), Value: newValue(i)})
		}
	}
	if err := sm.IngestRanges([]Range{union}, rows, 11, 1, nil); err != nil {
		t.Fatalf("patch of %v: %v", union, err)
	}
	got, _, err := Scan(sm.db, key(1000), key(1300), 0)
	if err != nil || len(got) != 300 {
		t.Fatalf("rows [1000, 1300): %d, %v", len(got), err)
	}
}
