package raftlog

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/testseed"
)

// history drives a Log like a raft follower would: appends at the current
// term, overwrites of uncommitted suffixes by a new leader, commit advances
// and compactions. It keeps the true log to check a damaged replay against.
type history struct {
	rng    *rand.Rand
	l      *Log
	term   uint64
	commit uint64
	truth  map[uint64]*pb.Entry // the log as written, by index
	last   uint64
	first  uint64 // first index not compacted
}

func newHistory(t *testing.T, rng *rand.Rand, l *Log) *history {
	if err := l.Bootstrap([]uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	return &history{rng: rng, l: l, term: 1, commit: 1, truth: map[uint64]*pb.Entry{}, last: 1, first: 2}
}

func (h *history) entry(i uint64) *pb.Entry {
	data := make([]byte, 1+h.rng.Intn(3000)) // some span several blocks
	h.rng.Read(data)
	return &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(h.term), Data: data}
}

// step does one random raft-like operation.
func (h *history) step(t *testing.T) {
	t.Helper()
	switch r := h.rng.Intn(10); {
	case r < 6: // append
		var ents []*pb.Entry
		for k := 0; k < 1+h.rng.Intn(4); k++ {
			h.last++
			e := h.entry(h.last)
			ents = append(ents, e)
			h.truth[h.last] = e
		}
		h.save(t, ents)
	case r < 7 && h.last > h.commit: // a new leader overwrites an uncommitted suffix
		h.term++
		from := h.commit + 1 + uint64(h.rng.Int63n(int64(h.last-h.commit)))
		for i := from; i <= h.last; i++ {
			delete(h.truth, i)
		}
		h.last = from - 1
		var ents []*pb.Entry
		for k := 0; k < 1+h.rng.Intn(3); k++ {
			h.last++
			e := h.entry(h.last)
			ents = append(ents, e)
			h.truth[h.last] = e
		}
		h.save(t, ents)
	case r < 9: // commit advances
		if h.last > h.commit {
			h.commit += 1 + uint64(h.rng.Int63n(int64(h.last-h.commit)))
		}
		h.save(t, nil)
	default: // compaction of committed entries
		if h.commit >= h.first+2 {
			c := h.first + uint64(h.rng.Int63n(int64(h.commit-h.first)))
			if err := h.l.Compact(c); err != nil {
				t.Fatal(err)
			}
			h.first = c + 1
		}
	}
}

func (h *history) save(t *testing.T, ents []*pb.Entry) {
	t.Helper()
	if err := h.l.Save(&pb.HardState{Term: proto.Uint64(h.term), Vote: proto.Uint64(1), Commit: proto.Uint64(h.commit)}, ents, nil); err != nil {
		t.Fatal(err)
	}
}

// damageBoth destroys the same bytes in both copies of the current
// generation: n places of 1..64 bytes, zeroed or flipped.
func damageBoth(t *testing.T, rng *rand.Rand, fs vfs.FS, gen uint64, size int64, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		off := rng.Int63n(size)
		length := 1 + rng.Int63n(64)
		zero := rng.Intn(2) == 0
		for c := 0; c < copies; c++ {
			name := "log/" + fileName(gen, c)
			f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, length)
			m, _ := f.ReadAt(buf, off)
			for i := 0; i < m; i++ {
				if zero {
					buf[i] = 0
				} else {
					buf[i] ^= 0x5a
				}
			}
			if _, err := f.WriteAt(buf[:m], off); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
}

func sameEntry(a, b *pb.Entry) bool { return proto.Equal(a, b) }

// TestDamagedReplayNeverLies writes random raft-like histories, destroys
// bytes in both copies, and checks what Open recovers: every entry it keeps
// is the one written at that index (never a stale or foreign one), and a
// peer holding the true log repairs it whole.
func TestDamagedReplayNeverLies(t *testing.T) {
	seed := testseed.Seed(t, "RAFTLOG_SEED")
	rng := rand.New(rand.NewSource(seed))
	var sealed, repaired, gaveUp int
	defer func() { t.Logf("sealed at open %d, repaired whole %d, cut at a hole %d", sealed, repaired, gaveUp) }()
	for round := 0; round < 200; round++ {
		fs := vfs.NewMem()
		l, err := Open(Options{FS: fs, Dir: "log", BlockBytes: 512 << rng.Intn(4)})
		if err != nil {
			t.Fatal(err)
		}
		h := newHistory(t, rng, l)
		for k := 0; k < 5+rng.Intn(60); k++ {
			h.step(t)
		}
		gen, size := l.Stats().Generation, l.Stats().SizeBytes
		l.Close()
		damageBoth(t, rng, fs, gen, size, 1+rng.Intn(3))
		l, err = Open(Options{FS: fs, Dir: "log", BlockBytes: l.opts.BlockBytes})
		if err != nil {
			t.Fatalf("seed %d round %d: open: %v", seed, round, err)
		}
		where := fmt.Sprintf("seed %d round %d", seed, round)
		l.mu.Lock()
		m := l.img.clone()
		d := l.damage
		l.mu.Unlock()
		for i := m.firstIndex(); i <= m.lastIndex(); i++ {
			e := m.at(i)
			if e == nil {
				continue
			}
			if want, ok := h.truth[i]; !ok || !sameEntry(e, want) {
				t.Fatalf("%s: entry %d kept from a stale or foreign write (damage %v)", where, i, d)
			}
		}
		if !d.TailUnknown && !l.Sealed() && m.lastIndex() > h.last {
			t.Fatalf("%s: log longer (%d) than written (%d)", where, m.lastIndex(), h.last)
		}
		if l.Sealed() {
			// Everything recovered locally: the log must be the truth up
			// to a torn tail.
			for i := m.firstIndex(); i <= m.lastIndex(); i++ {
				if m.at(i) == nil {
					t.Fatalf("%s: sealed log with a hole at %d", where, i)
				}
			}
			sealed++
			l.Close()
			continue
		}
		// A peer that holds the true log (committed up to h.commit) repairs
		// it: afterwards every entry matches the truth.
		lo, hi, ok := l.RepairSpan()
		if !ok {
			t.Fatalf("%s: unsealed log with nothing to repair (damage %v)", where, d)
		}
		var peer []*pb.Entry
		for i := lo; i <= min(hi, h.last); i++ {
			if e, ok := h.truth[i]; ok {
				peer = append(peer, e)
			}
		}
		if len(peer) > 0 && peer[0].GetIndex() != lo {
			// The peer compacted past what we need: nothing to offer.
			peer = nil
		}
		if _, err := l.Offer(peer, h.commit); err != nil {
			t.Fatalf("%s: offer: %v", where, err)
		}
		if len(l.Damage().Holes) > 0 {
			gaveUp++
			if err := l.GiveUp(); err != nil {
				t.Fatal(err)
			}
		} else {
			repaired++
			if err := l.Seal(); err != nil {
				t.Fatalf("%s: seal: %v", where, err)
			}
		}
		last, _ := l.LastIndex()
		first, _ := l.FirstIndex()
		if first <= last {
			ents, err := l.Entries(first, last+1, 1<<40)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			for _, e := range ents {
				if want := h.truth[e.GetIndex()]; !sameEntry(e, want) {
					t.Fatalf("%s: after repair entry %d differs from the truth", where, e.GetIndex())
				}
			}
		}
		st, _, _ := l.InitialState()
		if st.GetCommit() > last {
			t.Fatalf("%s: commit %d beyond last %d", where, st.GetCommit(), last)
		}
		l.Close()
	}
}

// TestOfferRules checks the repair rules on hand-made logs.
func TestOfferRules(t *testing.T) {
	mk := func(i, term uint64) *pb.Entry { return ent(i, term) }
	type tc struct {
		name      string
		ours      []*pb.Entry // nil = hole; index base+1+k
		commit    uint64
		tail      bool
		peer      []*pb.Entry
		peerC     uint64
		want      string
		truncated bool
	}
	for _, c := range []tc{
		{name: "anchored", ours: []*pb.Entry{mk(1, 1), nil, mk(3, 1)}, commit: 1,
			peer: []*pb.Entry{mk(2, 1), mk(3, 1)}, peerC: 1, want: "1.1 2.1 3.1"},
		{name: "anchor term differs, not committed", ours: []*pb.Entry{mk(1, 1), nil, mk(3, 2)}, commit: 1,
			peer: []*pb.Entry{mk(2, 1), mk(3, 1)}, peerC: 1, want: "1.1 _ 3.2"},
		{name: "committed adoption replaces a stale branch", ours: []*pb.Entry{mk(1, 1), nil, mk(3, 1), mk(4, 1)}, commit: 1,
			peer: []*pb.Entry{mk(2, 2), mk(3, 2)}, peerC: 3, want: "1.1 2.2 3.2", truncated: true},
		{name: "committed adoption keeps an anchored tail", ours: []*pb.Entry{mk(1, 1), nil, mk(3, 1), mk(4, 1)}, commit: 1,
			peer: []*pb.Entry{mk(2, 1), mk(3, 1)}, peerC: 2, want: "1.1 2.1 3.1 4.1"},
		{name: "unknown tail takes committed entries", ours: []*pb.Entry{mk(1, 1), mk(2, 1)}, commit: 2, tail: true,
			peer: []*pb.Entry{mk(3, 1), mk(4, 2)}, peerC: 4, want: "1.1 2.1 3.1 4.2"},
		{name: "uncommitted peer entries fill nothing unanchored", ours: []*pb.Entry{mk(1, 1), nil}, commit: 1,
			peer: []*pb.Entry{mk(2, 1)}, peerC: 1, want: "1.1 _"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newImage()
			m.ents = c.ours
			m.hs = hs(2, 1, c.commit)
			_, truncated := m.offer(c.peer, c.peerC, c.tail)
			var got string
			for i := m.firstIndex(); i <= m.lastIndex(); i++ {
				if got != "" {
					got += " "
				}
				if e := m.at(i); e != nil {
					got += fmt.Sprintf("%d.%d", e.GetIndex(), e.GetTerm())
				} else {
					got += "_"
				}
			}
			if got != c.want || truncated != c.truncated {
				t.Fatalf("got %q truncated=%v, want %q truncated=%v", got, truncated, c.want, c.truncated)
			}
		})
	}
}

// TestGiveUpKeepsVoteFloor: a log cut at a hole keeps a vote floor at its
// pre-damage last entry until it is again that up to date.
func TestGiveUpKeepsVoteFloor(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	offs := fill(t, l, 6) // entries 2..7 at term 2
	gen := l.Stats().Generation
	l.Close()
	for i := 0; i < 2; i++ {
		flipByte(t, fs, "log/"+fileName(gen, i), offs[3]+fragHeaderBytes+1) // entry 5
	}
	l = open(t, fs)
	defer l.Close()
	if err := l.GiveUp(); err != nil {
		t.Fatal(err)
	}
	if last, _ := l.LastIndex(); last != 4 {
		t.Fatalf("last %d, want 4", last)
	}
	term, index, ok := l.VoteFloor()
	if !ok || term != 2 || index != 7 {
		t.Fatalf("floor %d.%d %v, want 7.2", index, term, ok)
	}
	l.Close()
	l = open(t, fs) // the floor is durable
	if _, index, ok := l.VoteFloor(); !ok || index != 7 {
		t.Fatalf("floor lost on reopen")
	}
	if err := l.Save(hs(2, 1, 4), []*pb.Entry{ent(5, 2), ent(6, 2), ent(7, 2)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := l.VoteFloor(); ok {
		t.Fatal("floor kept after the log caught up")
	}
	l.Close()
	l = open(t, fs)
	if _, _, ok := l.VoteFloor(); ok {
		t.Fatal("floor back after reopen")
	}
}

// TestDiscardApplied: entries the state machine holds need no repair.
func TestDiscardApplied(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	offs := fill(t, l, 6) // entries 2..7
	gen := l.Stats().Generation
	l.Close()
	for i := 0; i < 2; i++ {
		flipByte(t, fs, "log/"+fileName(gen, i), offs[1]+fragHeaderBytes+1) // entry 3
	}
	l = open(t, fs)
	defer l.Close()
	if l.Sealed() {
		t.Fatal("sealed with a hole")
	}
	if err := l.DiscardApplied(5, 2); err != nil {
		t.Fatal(err)
	}
	if d := l.Damage(); len(d.Holes) != 0 {
		t.Fatalf("holes after discard: %v", d)
	}
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(t, l), "hs=2/1/7 voters=[1 2 3] first=6 last=7: 6.2:entry-6-2 7.2:entry-7-2"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestFallBackToPreviousGeneration: a newest generation with nothing
// readable falls back to the previous one, with the tail unknown.
func TestFallBackToPreviousGeneration(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	fill(t, l, 4)
	l.Close()
	l = open(t, fs) // generation 3, generation 2 kept
	gen := l.Stats().Generation
	l.Close()
	for i := 0; i < 2; i++ {
		if err := fs.Remove("log/" + fileName(gen, i)); err != nil {
			t.Fatal(err)
		}
		f, _ := fs.Create("log/"+fileName(gen, i), vfs.WriteCategoryUnspecified)
		f.Write(make([]byte, 300))
		f.Close()
	}
	l = open(t, fs)
	defer l.Close()
	if !l.Stats().FellBack || !l.Damage().TailUnknown {
		t.Fatalf("stats %v damage %v", l.Stats(), l.Damage())
	}
}
