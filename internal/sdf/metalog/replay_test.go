package metalog

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/testseed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func stream(recs ...Record) []byte {
	var out []byte
	for _, r := range recs {
		out = append(out, r.Record()...)
	}
	return out
}

var super = Super{Geometry: testLayout.Geometry, Created: 42}

// testBody is a checkpoint body on zones 8, 9 and 10 (three copies).
var testBody = onflash.CheckpointBody{Epoch: 3, Bytes: 100, Copies: [onflash.MetaCopies][]onflash.BodyRun{
	{{Zone: 8, Mask: 3, Pages: 1}}, {{Zone: 9, Mask: 3, Pages: 1}}, {{Zone: 10, Mask: 3, Pages: 1}}}}

func bodyOf(recs ...Record) func(onflash.CheckpointBody) ([]byte, error) {
	return func(onflash.CheckpointBody) ([]byte, error) { return stream(recs...), nil }
}

func noBody(onflash.CheckpointBody) ([]byte, error) { return nil, errors.New("no body expected") }

// TestReplayGolden replays a script that uses every record type, a body
// among them, and compares the tables with testdata/replay.golden (run
// with -update after an intended change and review the diff).
func TestReplayGolden(t *testing.T) {
	ext := func(fp uint64, z, zp, n int, seq uint64) extmap.Extent {
		return extmap.Extent{FilePage: fp, Zone: z, ZonePage: zp, N: n, Seq: seq}
	}
	s := stream(
		super,
		FailedDie{Channel: 1, Die: 0},
		ZoneReset{Zone: 9, Mask: 2},
		ZoneState{Zone: 11, State: 3},
		Body{testBody},
		CheckpointDone{NextFileID: 5, NextSeq: 100},
		Create{ID: 5, Name: "wal", Hint: 1, MTime: 10},
		Extents{ID: 5, Size: 5000, MTime: 11, Exts: []extmap.Extent{ext(0, 20, 0, 3, 100)}},
		Extents{ID: 5, Size: 5000, MTime: 12, Exts: []extmap.Extent{ext(1, 21, 4, 1, 103)}}, // replaces page 1
		ZoneOpen{Zone: 21, Open: true},
		ZoneOpen{Zone: 20},
		Rename{ID: 2, Name: "sst"},          // replaces the body's "sst" by itself: a no-op
		Rename{ID: 1, Name: "sst"},          // replaces file 2
		Create{ID: 6, Name: "wal", Hint: 2}, // replaces file 5
		Delete{ID: 3},
		Extents{ID: 99, Size: 1, Exts: []extmap.Extent{ext(0, 30, 0, 1, 500)}}, // no such file: skipped
		ZoneReset{Zone: 11, Mask: 3},  // drops zone 11's journaled state
		FailedDie{Channel: 1, Die: 0}, // again
		Create{ID: 4, Name: "by-name-only"},
		Create{ID: 4, Name: "reused-id"}, // a damaged journal reusing an ID
	)
	body := bodyOf(
		Create{ID: 1, Name: "manifest", Hint: 3, MTime: 1},
		Extents{ID: 1, Size: 4096, MTime: 2, Exts: []extmap.Extent{ext(0, 12, 0, 2, 7)}},
		Create{ID: 2, Name: "sst", Hint: 2, MTime: 3},
		Extents{ID: 2, Size: 10000, MTime: 4, Exts: []extmap.Extent{ext(0, 13, 0, 4, 9), ext(4, 14, 2, 1, 50)}},
		Create{ID: 3, Name: "tmp"},
		ZoneOpen{Zone: 14, Open: true},
	)
	tables, err := Replay(testLayout, 3, s, body)
	if err != nil {
		t.Fatal(err)
	}
	got := []byte(tables.String())
	path := filepath.Join("testdata", "replay.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("replay differs from %s (run with -update after an intended change):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestReplayRejects: every stream replay must refuse is a corruption error.
func TestReplayRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream []byte
		body   func(onflash.CheckpointBody) ([]byte, error)
	}{
		{"no superblock", stream(Create{ID: 1, Name: "a"}), noBody},
		{"two bodies", stream(super, Body{testBody}, Body{testBody}), bodyOf()},
		{"a superblock in the body", stream(super, Body{testBody}), bodyOf(super)},
		{"a body in the body", stream(super, Body{testBody}), bodyOf(Body{testBody})},
		{"bytes in the body that are no record", stream(super, Body{testBody}), func(onflash.CheckpointBody) ([]byte, error) {
			return append(stream(Create{ID: 1, Name: "a"}), 1, 2, 3), nil
		}},
		{"an impossible die mask", stream(super, ZoneReset{Zone: 12, Mask: 1 << 5}), noBody},
		{"a bad extent of a live file", stream(super, Create{ID: 1, Name: "a"}, Extents{ID: 1, Exts: []extmap.Extent{{Zone: 2, N: 1}}}), noBody},
	} {
		if tables, err := Replay(testLayout, 1, c.stream, c.body); !base.IsCorruption(err) {
			t.Errorf("%s: replayed to %v, %v; want a corruption error", c.name, tables, err)
		}
	}
	// A body that cannot be read fails the replay with the reader's error.
	boom := errors.New("boom")
	if _, err := Replay(testLayout, 1, stream(super, Body{testBody}), func(onflash.CheckpointBody) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("unreadable body: %v", err)
	}
	// A torn record ends the stream: what precedes it is replayed.
	s := stream(super, Create{ID: 1, Name: "a"})
	s = append(s, Create{ID: 2, Name: "b"}.Record()[:5]...)
	if tables, err := Replay(testLayout, 1, s, noBody); err != nil || len(tables.Files) != 1 {
		t.Errorf("torn tail: %v, %v", tables, err)
	}
}

// model is a second computation of what a journal replays to: files as
// maps of page to place, by ID and by name.
type model struct {
	byID       map[uint64]*mfile
	byName     map[string]*mfile
	nextID     uint64
	nextSeq    uint64
	masks      map[int]uint64
	states     map[int]uint64
	unsealed   map[int]bool
	failed     map[flash.DieAddr]bool
	failedList []flash.DieAddr
}

type mfile struct {
	id          uint64
	name        string
	hint        uint64
	mtime, size int64
	pages       map[uint64][3]uint64 // file page -> zone, zone page, sequence number
}

func (m *model) unlink(f *mfile) {
	if m.byName[f.name] == f {
		delete(m.byName, f.name)
	}
	delete(m.byID, f.id)
}

// TestReplayAgainstModel draws random journals (every record type, names
// and IDs reused, extents overlapping) and checks that Replay reaches the
// state the model reaches, page by page.
func TestReplayAgainstModel(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	l := testLayout
	for run := 0; run < 300; run++ {
		m := &model{byID: map[uint64]*mfile{}, byName: map[string]*mfile{}, nextID: 1, nextSeq: 1,
			masks: map[int]uint64{}, states: map[int]uint64{}, unsealed: map[int]bool{}, failed: map[flash.DieAddr]bool{}}
		recs := []Record{Super{Geometry: l.Geometry, Created: int64(run)}}
		seq := uint64(1)
		dataZone := func() int { return onflash.MetaZoneCount + rng.Intn(l.Zones()-onflash.MetaZoneCount) }
		for i := 0; i < 60; i++ {
			id := uint64(1 + rng.Intn(8))
			name := fmt.Sprintf("f%d", rng.Intn(6))
			switch rng.Intn(9) {
			case 0, 1:
				recs = append(recs, Create{ID: id, Name: name, Hint: uint64(rng.Intn(5)), MTime: int64(i)})
				if old := m.byName[name]; old != nil {
					m.unlink(old)
				}
				f := &mfile{id: id, name: name, hint: recs[len(recs)-1].(Create).Hint, mtime: int64(i), pages: map[uint64][3]uint64{}}
				m.byName[name], m.byID[id] = f, f
				m.nextID = max(m.nextID, id+1)
			case 2:
				recs = append(recs, Rename{ID: id, Name: name})
				if f := m.byID[id]; f != nil {
					if old := m.byName[name]; old != nil && old != f {
						m.unlink(old)
					}
					delete(m.byName, f.name)
					f.name = name
					m.byName[name] = f
				}
			case 3:
				recs = append(recs, Delete{ID: id})
				if f := m.byID[id]; f != nil {
					m.unlink(f)
				}
			case 4, 5, 6:
				x := Extents{ID: id, Size: int64(rng.Intn(50000)), MTime: int64(i)}
				for k := rng.Intn(3) + 1; k > 0; k-- {
					e := extmap.Extent{FilePage: uint64(rng.Intn(12)), Zone: dataZone(), ZonePage: rng.Intn(10), N: 1 + rng.Intn(4), Seq: seq}
					seq += uint64(e.N)
					x.Exts = append(x.Exts, e)
				}
				recs = append(recs, x)
				if f := m.byID[id]; f != nil {
					for _, e := range x.Exts {
						for k := 0; k < e.N; k++ {
							f.pages[e.FilePage+uint64(k)] = [3]uint64{uint64(e.Zone), uint64(e.ZonePage + k), e.Seq + uint64(k)}
						}
						m.nextSeq = max(m.nextSeq, e.Seq+uint64(e.N))
					}
					f.size, f.mtime = x.Size, x.MTime
				}
			case 7:
				z := dataZone()
				switch rng.Intn(4) {
				case 0:
					mask := uint64(rng.Intn(int(l.FullDieMask()) + 1))
					recs = append(recs, ZoneReset{Zone: z, Mask: mask})
					m.masks[z] = mask
					delete(m.states, z)
					m.unsealed[z] = false
				case 1:
					open := rng.Intn(2) == 0
					recs = append(recs, ZoneOpen{Zone: z, Open: open})
					m.unsealed[z] = open
				case 2:
					st := uint64(3 + rng.Intn(2))
					recs = append(recs, ZoneState{Zone: z, State: st})
					m.states[z] = st
				case 3:
					d := flash.DieAddr{Channel: rng.Intn(l.Geometry.Channels), Die: rng.Intn(l.Geometry.DiesPerChannel)}
					recs = append(recs, FailedDie{Channel: d.Channel, Die: d.Die})
					if !m.failed[d] {
						m.failed[d] = true
						m.failedList = append(m.failedList, d)
					}
				}
			case 8:
				done := CheckpointDone{NextFileID: uint64(rng.Intn(12)), NextSeq: uint64(rng.Intn(200))}
				recs = append(recs, done)
				m.nextID = max(m.nextID, done.NextFileID)
				m.nextSeq = max(m.nextSeq, done.NextSeq)
			}
		}
		tables, err := Replay(l, 1, stream(recs...), noBody)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if err := compare(tables, m); err != nil {
			t.Fatalf("run %d: %v\nrecords: %v", run, err, recs)
		}
	}
}

func compare(tables *Tables, m *model) error {
	if tables.NextFileID != m.nextID || tables.NextSeq != m.nextSeq || tables.Created == -1 {
		return fmt.Errorf("next file %d seq %d, model %d %d", tables.NextFileID, tables.NextSeq, m.nextID, m.nextSeq)
	}
	if len(tables.Files) != len(m.byID) || len(tables.Names) != len(m.byName) {
		return fmt.Errorf("%d files %d names, model %d %d", len(tables.Files), len(tables.Names), len(m.byID), len(m.byName))
	}
	for id, mf := range m.byID {
		f := tables.Files[id]
		if f == nil || f.Name != mf.name || f.Hint != mf.hint || f.MTime != mf.mtime || f.Size != mf.size {
			return fmt.Errorf("file %d: %+v, model %+v", id, f, mf)
		}
		pages := map[uint64][3]uint64{}
		for _, e := range f.Map.Exts {
			for k := 0; k < e.N; k++ {
				pages[e.FilePage+uint64(k)] = [3]uint64{uint64(e.Zone), uint64(e.ZonePage + k), e.Seq + uint64(k)}
			}
		}
		if fmt.Sprint(pages) != fmt.Sprint(mf.pages) {
			return fmt.Errorf("file %d maps %v, model %v", id, pages, mf.pages)
		}
	}
	for name, mf := range m.byName {
		f := tables.Names[name]
		if f == nil || f.ID != mf.id || (tables.Files[f.ID] == f) != (m.byID[mf.id] == mf) {
			return fmt.Errorf("name %q: %+v, model %+v", name, f, mf)
		}
	}
	if fmt.Sprint(tables.Masks, tables.States, tables.Unsealed, tables.Failed) != fmt.Sprint(m.masks, m.states, m.unsealed, m.failedList) {
		return fmt.Errorf("zones %v %v %v failed %v, model %v %v %v %v", tables.Masks, tables.States, tables.Unsealed, tables.Failed,
			m.masks, m.states, m.unsealed, m.failedList)
	}
	return nil
}

// TestRecover maps the pages found in unsealed zones case by case.
func TestRecover(t *testing.T) {
	const ps = 512
	found := func(page uint64, seq uint64, valid uint32, zp int) Found {
		return Found{ID: onflash.PageID{FileID: 1, Page: page, Seq: seq, Valid: valid}, Zone: 20, ZonePage: zp}
	}
	for _, c := range []struct {
		name  string
		size  int64 // journaled: pages [0, size) mapped at seq 10+page
		found []Found
		want  string
	}{
		{"extends", 2 * ps, []Found{found(2, 50, ps, 0), found(3, 51, 100, 1)}, "size 1636 recovered 2"},
		{"a hole is not taken", 2 * ps, []Found{found(3, 51, ps, 0)}, "size 1024 recovered 0"},
		{"after a partial page", ps + 10, []Found{found(2, 50, ps, 0)}, "size 522 recovered 0"},
		{"a newer last page", ps + 10, []Found{found(1, 50, 300, 0)}, "size 812 recovered 1"},
		{"an older copy is not taken", 2 * ps, []Found{found(1, 5, 100, 0)}, "size 1024 recovered 0"},
		{"replaces inside", 3 * ps, []Found{found(0, 50, ps, 0)}, "size 1536 recovered 1"},
		{"unordered", 2 * ps, []Found{found(3, 52, ps, 1), found(2, 51, ps, 0)}, "size 2048 recovered 2"},
		{"another file's", 2 * ps, []Found{{ID: onflash.PageID{FileID: 9, Page: 2, Seq: 70}, Zone: 20}}, "size 1024 recovered 0"},
	} {
		f := &File{ID: 1, Size: c.size}
		for p := int64(0); p*ps < c.size; p++ {
			f.Map.Put(extmap.Extent{FilePage: uint64(p), Zone: 12, ZonePage: int(p), N: 1, Seq: 10 + uint64(p)}, nil)
		}
		tables := &Tables{Files: map[uint64]*File{1: f}, NextSeq: 1}
		n := tables.Recover(c.found, ps)
		if got := fmt.Sprintf("size %d recovered %d", f.Size, n); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		maxSeq := uint64(0)
		for _, x := range c.found {
			maxSeq = max(maxSeq, x.ID.Seq)
		}
		if tables.NextSeq != maxSeq+1 {
			t.Errorf("%s: next seq %d, want %d", c.name, tables.NextSeq, maxSeq+1)
		}
	}
}
