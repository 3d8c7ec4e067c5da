package raftlog

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
)

func ent(index, term uint64) *pb.Entry {
	return &pb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Data: []byte(fmt.Sprintf("entry-%d-%d", index, term))}
}

func hs(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
}

func open(t *testing.T, fs vfs.FS) *Log {
	t.Helper()
	l, err := Open(Options{FS: fs, Dir: "log"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

// describe renders the log's raft-visible state.
func describe(t *testing.T, l *Log) string {
	t.Helper()
	h, cs, err := l.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	s := fmt.Sprintf("hs=%d/%d/%d voters=%v first=%d last=%d:", h.GetTerm(), h.GetVote(), h.GetCommit(), cs.GetVoters(), first, last)
	if last >= first {
		ents, err := l.Entries(first, last+1, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			s += fmt.Sprintf(" %d.%d:%s", e.GetIndex(), e.GetTerm(), e.GetData())
		}
	}
	return s
}

func flipByte(t *testing.T, fs vfs.FS, name string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, fs vfs.FS, name string) int64 {
	t.Helper()
	st, err := fs.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// fill writes a bootstrap snapshot and n single-entry Saves, returning the
// file offsets where each Save's record starts.
func fill(t *testing.T, l *Log, n int) []int64 {
	t.Helper()
	if err := l.Bootstrap([]uint64{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i := 2; i < 2+n; i++ {
		offs = append(offs, l.Stats().SizeBytes)
		if err := l.Save(hs(2, 1, uint64(i)), []*pb.Entry{ent(uint64(i), 2)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return offs
}

func TestRoundTripAndRaftStorage(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	if !l.IsEmpty() {
		t.Fatal("new log not empty")
	}
	fill(t, l, 5)
	// A conflicting append from a new leader truncates the suffix.
	if err := l.Save(hs(3, 2, 4), []*pb.Entry{ent(5, 3)}, nil); err != nil {
		t.Fatal(err)
	}
	want := "hs=3/2/4 voters=[1 2 3] first=2 last=5: 2.2:entry-2-2 3.2:entry-3-2 4.2:entry-4-2 5.3:entry-5-3"
	if got := describe(t, l); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if term, err := l.Term(1); err != nil || term != 1 {
		t.Fatalf("term(1) = %d, %v", term, err)
	}
	if _, err := l.Term(0); err != raft.ErrCompacted {
		t.Fatalf("term(0) err = %v", err)
	}
	if _, err := l.Term(6); err != raft.ErrUnavailable {
		t.Fatalf("term(6) err = %v", err)
	}
	if ents, _ := l.Entries(2, 6, 1); len(ents) != 1 {
		t.Fatalf("size limit: %d entries", len(ents))
	}
	if err := l.Bootstrap([]uint64{1}); !base.IsInvalidArgument(err) {
		t.Fatalf("bootstrap twice: %v", err)
	}
	l.Close()
	l = open(t, fs)
	if got := describe(t, l); got != want {
		t.Fatalf("after reopen\ngot  %s\nwant %s", got, want)
	}
	if st := l.Stats(); st.FragmentsRepaired != 0 || st.TornTailBytes != 0 || st.RecordsLost != 0 {
		t.Fatalf("clean reopen stats %v", st)
	}
	// Snapshot and compaction survive a reopen.
	if _, err := l.CreateSnapshot(4, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("sm@4")); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(3); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, fs)
	want = "hs=3/2/4 voters=[1 2 3] first=4 last=5: 4.2:entry-4-2 5.3:entry-5-3"
	if got := describe(t, l); got != want {
		t.Fatalf("after compact\ngot  %s\nwant %s", got, want)
	}
	snap, _ := l.Snapshot()
	if string(snap.GetData()) != "sm@4" || snap.GetMetadata().GetIndex() != 4 {
		t.Fatalf("snapshot %v", snap)
	}
	// Installing a snapshot from the leader resets the log.
	in := &pb.Snapshot{Data: []byte("sm@9"), Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(9), Term: proto.Uint64(3), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	if err := l.Save(hs(3, 2, 9), nil, in); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, fs)
	if got, want := describe(t, l), "hs=3/2/9 voters=[1 2 3] first=10 last=9:"; got != want {
		t.Fatalf("after snapshot\ngot  %s\nwant %s", got, want)
	}
	l.Close()
}

func TestOneCorruptCopyLosesNothing(t *testing.T) {
	for copyIndex := 0; copyIndex < 2; copyIndex++ {
		t.Run(fmt.Sprint("copy", copyIndex), func(t *testing.T) {
			fs := vfs.NewMem()
			l := open(t, fs)
			offs := fill(t, l, 10)
			want := describe(t, l)
			gen := l.Stats().Generation
			l.Close()
			name := fileName(gen, copyIndex)
			// Corrupt the header of one fragment (its length field) and the
			// data of another: framing must survive via the other copy.
			flipByte(t, fs, "log/"+name, offs[3]+5)
			flipByte(t, fs, "log/"+name, offs[7]+fragHeaderBytes+2)
			l = open(t, fs)
			if got := describe(t, l); got != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			if st := l.Stats(); st.FragmentsRepaired != 2 || st.RecordsLost != 0 {
				t.Fatalf("stats %v", st)
			}
			l.Close()
			l = open(t, fs)
			if st := l.Stats(); st.FragmentsRepaired != 0 {
				t.Fatalf("repair not persisted: %v", st)
			}
			l.Close()
		})
	}
}

// TestBothCopiesCorruptInMiddleIsRepairedFromPeer: an entry lost in both
// copies is a hole, not data loss and not a torn tail; a peer's entries
// fill it (anchored by the next intact entry) and the log seals whole.
func TestBothCopiesCorruptInMiddleIsRepairedFromPeer(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	offs := fill(t, l, 6)
	want := describe(t, l)
	gen := l.Stats().Generation
	l.Close()
	for i := 0; i < 2; i++ {
		flipByte(t, fs, "log/"+fileName(gen, i), offs[2]+fragHeaderBytes+1)
	}
	l, err := Open(Options{FS: fs, Dir: "log"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Sealed() {
		t.Fatal("a log with a lost entry opened sealed")
	}
	d := l.Damage()
	if fmt.Sprint(d.Holes) != "[[4,4]]" || d.TailUnknown || d.HardStateUncertain {
		t.Fatalf("damage %v", d)
	}
	lo, hi, ok := l.RepairSpan()
	if !ok || lo != 4 || hi != 8 {
		t.Fatalf("repair span %d..%d %v", lo, hi, ok)
	}
	// A peer whose entry 5 has another term is no anchor.
	if n, _ := l.Offer([]*pb.Entry{ent(4, 2), ent(5, 3)}, 3); n != 0 {
		t.Fatalf("filled %d from a peer that does not match", n)
	}
	if n, _ := l.Offer([]*pb.Entry{ent(4, 2), ent(5, 2)}, 3); n != 1 {
		t.Fatalf("filled %d, want 1", n)
	}
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
	if got := describe(t, l); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, _, ok := l.VoteFloor(); ok {
		t.Fatal("a whole repair left a vote floor")
	}
}

func TestTornTailIsDropped(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	fill(t, l, 4)
	want := describe(t, l)
	// A Save that crashed half way: its record is partly in copy 0 and
	// not in copy 1 at all.
	fr := l.fr
	rec, err := l.encode(&fr, []decoded{{kind: recEntry, entry: ent(6, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.files[0].Write(rec[:len(rec)/2]); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, fs)
	if got := describe(t, l); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if st := l.Stats(); st.TornTailBytes != int64(len(rec)/2) {
		t.Fatalf("stats %v", st)
	}
	// The log keeps working after the torn tail.
	if err := l.Save(hs(2, 1, 6), []*pb.Entry{ent(6, 2)}, nil); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, fs)
	if last, _ := l.LastIndex(); last != 6 {
		t.Fatalf("last %d", last)
	}
	l.Close()
}

func TestIncompleteRewriteIsIgnored(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	fill(t, l, 3)
	want := describe(t, l)
	gen := l.Stats().Generation
	l.Close()
	// A rewrite that crashed before its files were renamed into place.
	for i := 0; i < 2; i++ {
		f, _ := fs.Create("log/"+fileName(gen+1, i)+tmpSuffix, vfs.WriteCategoryUnspecified)
		f.Write([]byte{0x46, 0x4d, 0x52})
		f.Close()
	}
	l = open(t, fs)
	if got := describe(t, l); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if g := l.Stats().Generation; g != gen+1 {
		t.Fatalf("generation %d, want %d", g, gen+1)
	}
	names, _ := fs.List("log")
	for _, n := range names {
		if _, tmp, _ := parseFileName(n); tmp {
			t.Fatalf("temporary file %s left", n)
		}
	}
	l.Close()
}

func TestRewriteOnThreshold(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open(Options{FS: fs, Dir: "log", RewriteThresholdBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 200)
	if err := l.Compact(150); err != nil {
		t.Fatal(err)
	}
	want := describe(t, l)
	if st := l.Stats(); st.Rewrites < 2 || st.SizeBytes > 8192 {
		t.Fatalf("stats %v", st)
	}
	l.Close()
	names, _ := fs.List("log")
	if len(names) != 4 {
		t.Fatalf("want the current and the previous generation, got %v", names)
	}
	l = open(t, fs)
	if got := describe(t, l); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	l.Close()
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{Dir: "x"},
		{FS: vfs.NewMem()},
		{FS: vfs.NewMem(), Dir: "x", RewriteThresholdBytes: 10},
		{FS: vfs.NewMem(), Dir: "x", MaxRecordBytes: 1},
		{FS: vfs.NewMem(), Dir: "x", BlockBytes: 100},
	} {
		if _, err := Open(o); !base.IsInvalidArgument(err) {
			t.Fatalf("Open(%+v) err = %v", o, err)
		}
	}
}

// TestRandomSingleCopyCorruption flips random bytes, each in one copy only
// (never the same record in both), and checks that nothing is lost.
func TestRandomSingleCopyCorruption(t *testing.T) {
	seed := testseed.Seed(t, "RAFTLOG_SEED")
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 30; round++ {
		fs := vfs.NewMem()
		l := open(t, fs)
		offs := fill(t, l, 20)
		want := describe(t, l)
		gen := l.Stats().Generation
		end := l.Stats().SizeBytes
		l.Close()
		bounds := append(offs, end)
		for k := 0; k < 1+rng.Intn(6); k++ {
			r := rng.Intn(len(offs))
			// Even records in copy 0, odd in copy 1: no record loses both.
			c := r % 2
			off := bounds[r] + rng.Int63n(bounds[r+1]-bounds[r])
			flipByte(t, fs, "log/"+fileName(gen, c), off)
		}
		l = open(t, fs)
		if got := describe(t, l); got != want {
			t.Fatalf("seed %d round %d\ngot  %s\nwant %s", seed, round, got, want)
		}
		l.Close()
	}
}

// TestCommitOnlyHardStateIsLazy: a Ready whose hard state moves only the
// commit index writes and syncs nothing; the commit index rides with the
// next record written, a term or vote change is written at once, and
// CommitAtLeast makes a state machine's applied index durable as committed.
func TestCommitOnlyHardStateIsLazy(t *testing.T) {
	fs := vfs.NewMem()
	l := open(t, fs)
	fill(t, l, 3) // entries 2..4, hs 2/1/4
	name := "log/" + fileName(l.gen, 0)
	if err := l.Save(hs(2, 1, 4), []*pb.Entry{ent(5, 2), ent(6, 2)}, nil); err != nil {
		t.Fatal(err)
	}
	size := fileSize(t, fs, name)
	// Commit moves to 6 alone: nothing written.
	if err := l.Save(hs(2, 1, 6), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, fs, name); got != size {
		t.Fatalf("a commit-only hard state wrote %d bytes", got-size)
	}
	if _, commit := l.PeerEntries(2, 7, 1<<20); commit != 6 {
		t.Fatalf("peers are told commit %d, want 6", commit)
	}
	// A restart now finds the commit index last written (4)...
	l.Close()
	l = open(t, fs)
	if got, want := describe(t, l), "hs=2/1/4 voters=[1 2 3] first=2 last=6: 2.2:entry-2-2 3.2:entry-3-2 4.2:entry-4-2 5.2:entry-5-2 6.2:entry-6-2"; got != want {
		t.Fatalf("after restart\ngot  %s\nwant %s", got, want)
	}
	// ...which the state machine's applied index raises, durably; an
	// index past the log or below the commit changes nothing.
	for _, i := range []uint64{5, 3, 9} {
		if err := l.CommitAtLeast(i); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	l = open(t, fs)
	if h, _, _ := l.InitialState(); h.GetCommit() != 5 {
		t.Fatalf("commit %d after CommitAtLeast(5), want 5", h.GetCommit())
	}
	// A pending commit rides with the next write: an append without a
	// hard state of its own.
	if err := l.Save(hs(2, 1, 6), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(nil, []*pb.Entry{ent(7, 2)}, nil); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, fs)
	if h, _, _ := l.InitialState(); h.GetCommit() != 6 {
		t.Fatalf("commit %d after an append carried it, want 6", h.GetCommit())
	}
	// A vote is written at once, commit and all.
	size = fileSize(t, fs, "log/"+fileName(l.gen, 0))
	if err := l.Save(hs(3, 2, 7), nil, nil); err != nil {
		t.Fatal(err)
	}
	if fileSize(t, fs, "log/"+fileName(l.gen, 0)) == size {
		t.Fatal("a new term and vote were not written")
	}
	l.Close()
	l = open(t, fs)
	if h, _, _ := l.InitialState(); h.GetTerm() != 3 || h.GetVote() != 2 || h.GetCommit() != 7 {
		t.Fatalf("hard state %v after a vote", h)
	}
	l.Close()
}
