package raftlog

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// copyOne says whether an errorfs operation is on copy 1 of a generation.
func copyOne(op errorfs.Op) bool {
	return strings.HasSuffix(strings.TrimSuffix(op.Path, tmpSuffix), ".1")
}

// TestSaveReturnsBeforeCopyOneIsWritten: Save returns once copy 0 is
// synced, with copy 1 not yet written (its writer is held back); a crash
// then (only what was synced survives) loses no record Save returned for,
// and the reopened log reads them from copy 0 alone.
func TestSaveReturnsBeforeCopyOneIsWritten(t *testing.T) {
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll("log", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(mem, ""); err != nil { // the log directory's own entry
		t.Fatal(err)
	}
	var hold atomic.Bool
	release := make(chan struct{})
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if hold.Load() && copyOne(op) && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync) {
			<-release
		}
		return nil
	}))
	l, err := Open(Options{FS: fs, Dir: "log"})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 3)
	hold.Store(true)
	for i := uint64(5); i < 9; i++ {
		// Returns although copy 1's writer is stuck at its first write.
		if err := l.Save(hs(2, 1, i), []*pb.Entry{ent(i, 2)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := describe(t, l)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{}) // exactly what was synced
	if s0, s1 := fileSize(t, crashed, "log/"+fileName(l.gen, 0)), fileSize(t, crashed, "log/"+fileName(l.gen, 1)); s1 >= s0 {
		t.Fatalf("copy 1 (%d B) is not behind copy 0 (%d B) while its writer is held", s1, s0)
	}
	close(release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s0, s1 := fileSize(t, mem, "log/"+fileName(l.gen, 0)), fileSize(t, mem, "log/"+fileName(l.gen, 1)); s1 != s0 {
		t.Fatalf("after Close copy 1 is %d B, copy 0 %d B: Close must write and sync what was queued", s1, s0)
	}
	back := open(t, crashed)
	defer back.Close()
	if got := describe(t, back); got != want {
		t.Fatalf("after a crash with copy 1 behind\ngot  %s\nwant %s", got, want)
	}
	if st := back.Stats(); st.RecordsLost != 0 {
		t.Fatalf("records lost: %+v", st)
	}
}

// TestCopyOneFailureFailsTheNextSave: a failed sync of copy 1 (behind
// Save) fails the next Save, and the log refuses further use; what Save
// acknowledged is in copy 0 and found at reopen.
func TestCopyOneFailureFailsTheNextSave(t *testing.T) {
	mem := vfs.NewMem()
	var fail atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && copyOne(op) && op.Kind == errorfs.OpFileSync {
			return errorfs.ErrInjected
		}
		return nil
	}))
	l, err := Open(Options{FS: fs, Dir: "log"})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 3)
	if err := l.lag.drain(); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := l.Save(hs(2, 1, 5), []*pb.Entry{ent(5, 2)}, nil); err != nil {
		t.Fatalf("copy 0 synced, yet: %v", err)
	}
	want := describe(t, l)
	if err := l.lag.drain(); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("copy 1's writer: %v", err)
	}
	fail.Store(false)
	if err := l.Save(hs(2, 1, 6), []*pb.Entry{ent(6, 2)}, nil); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("save after copy 1 failed: %v", err)
	}
	if err := l.Save(hs(2, 1, 6), []*pb.Entry{ent(6, 2)}, nil); err == nil {
		t.Fatal("log accepted a write after a failed one")
	}
	l.Close()
	back := open(t, mem)
	defer back.Close()
	if got := describe(t, back); got != want {
		t.Fatalf("after reopen\ngot  %s\nwant %s", got, want)
	}
}

// TestCopyOneSyncsAreShared: Saves that queue while copy 1's writer syncs
// share its next sync.
func TestCopyOneSyncsAreShared(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if hold.Load() && copyOne(op) && op.Kind == errorfs.OpFileSync {
			<-release
		}
		return nil
	}))
	l, err := Open(Options{FS: fs, Dir: "log"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fill(t, l, 1)
	if err := l.lag.drain(); err != nil {
		t.Fatal(err)
	}
	before := l.lag.syncCount()
	hold.Store(true)
	const saves = 20
	for i := uint64(3); i < 3+saves; i++ {
		if err := l.Save(hs(2, 1, i), []*pb.Entry{ent(i, 2)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	hold.Store(false)
	close(release)
	if err := l.lag.drain(); err != nil {
		t.Fatal(err)
	}
	// The first Save's sync was held; the other 19 queued behind it and
	// went in one write and one sync.
	if n := l.lag.syncCount() - before; n > 2 {
		t.Fatalf("%d syncs of copy 1 for %d Saves, want at most 2", n, saves)
	}
}
