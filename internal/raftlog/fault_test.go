package raftlog

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestWriteFailureStopsTheLog injects a failed sync: Save reports it, the
// log refuses further use (its files are in an unknown state), and a reopen
// finds every Save that returned nil.
func TestWriteFailureStopsTheLog(t *testing.T) {
	mem := vfs.NewMem()
	var failSyncs atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failSyncs.Load() && op.Kind == errorfs.OpFileSync {
			return errorfs.ErrInjected
		}
		return nil
	}))
	l, err := Open(Options{FS: fs, Dir: "log"})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 5)
	want := describe(t, l)
	failSyncs.Store(true)
	if err := l.Save(hs(2, 1, 7), []*pb.Entry{ent(7, 2)}, nil); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("save with failing sync: %v", err)
	}
	failSyncs.Store(false)
	if err := l.Save(hs(2, 1, 7), []*pb.Entry{ent(7, 2)}, nil); err == nil {
		t.Fatal("log accepted a write after a failed one")
	}
	l.Close()
	// The unsynced record may or may not have reached the files; what was
	// acknowledged is there either way.
	l, err = Open(Options{FS: mem, Dir: "log"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := describe(t, l)
	withSeventh := "hs=2/1/7 voters=[1 2 3] first=2 last=7: 2.2:entry-2-2 3.2:entry-3-2 4.2:entry-4-2 5.2:entry-5-2 6.2:entry-6-2 7.2:entry-7-2"
	if got != want && got != withSeventh {
		t.Fatalf("after reopen\ngot  %s\nwant %s", got, want)
	}
}
