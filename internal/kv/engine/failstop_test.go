package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/torture/faultfs"
)

// TestWriteErrorOnManifestFailsEngine: a write error on the MANIFEST (the
// torture harness's KV CORDS cell "pebble MANIFEST / write error", which
// panicked the whole process through Pebble's Logger.Fatalf) fails the
// engine: the flush returns ErrEngineFailed, the owner is told once, no
// further write is taken, Close returns, and the files reopen with what
// the last good flush made durable.
func TestWriteErrorOnManifestFailsEngine(t *testing.T) {
	for _, target := range []string{"MANIFEST", "marker.manifest"} {
		t.Run(target, func(t *testing.T) {
			ffs := faultfs.New(vfs.NewMem())
			var told atomic.Int32
			var toldErr atomic.Pointer[error]
			sm, durable := filledEngine(t, ffs, func(err error) {
				told.Add(1)
				toldErr.Store(&err)
			})
			more := &kvpb.WriteBatch{Ops: []*kvpb.Op{put("key-late", "late")}}
			if err := sm.ApplyWrite(durable+1, 1, more); err != nil {
				t.Fatal(err)
			}
			ffs.Set(&faultfs.Rule{Kind: faultfs.WriteError, Match: func(p string) bool {
				return strings.HasPrefix(ffs.PathBase(p), target)
			}})
			if target == "marker.manifest" {
				// Pebble moves the marker to a new MANIFEST at open (the
				// first edit after an open starts a new MANIFEST): an open
				// under the fault fails with an error, and does not panic.
				if err := sm.Close(); err != nil {
					t.Fatal(err)
				}
				_, err := Open(ffs, "sm", 0, 4<<20, nil, func(err error) {
					told.Add(1)
					toldErr.Store(&err)
				})
				if !errors.Is(err, ErrEngineFailed) || ffs.Injected() == 0 {
					t.Fatalf("open under a write error on the marker: %v (%d faults injected)", err, ffs.Injected())
				}
				// The files were fenced at the failure: they reopen as
				// after a crash there, with what was durable.
				reopenHoldsDurable(t, ffs, durable)
				return
			}
			if _, err := sm.FlushDurable(); !errors.Is(err, ErrEngineFailed) {
				t.Fatalf("flush under a write error on %s: %v, want ErrEngineFailed", target, err)
			}
			if ffs.Injected() == 0 {
				t.Fatalf("the fault never fired")
			}
			<-sm.FailedC()
			if sm.Failed() == nil || told.Load() != 1 || !errors.Is(*toldErr.Load(), ErrEngineFailed) {
				t.Fatalf("Failed %v, owner told %d times", sm.Failed(), told.Load())
			}
			if !strings.Contains(sm.Failed().Error(), "MANIFEST") {
				t.Fatalf("the failure does not say what failed: %v", sm.Failed())
			}
			if err := sm.ApplyWrite(durable+10, 1, more); !errors.Is(err, ErrEngineFailed) {
				t.Fatalf("write to a failed engine: %v", err)
			}
			_ = sm.Close() // returns; its error is only reported
			reopenHoldsDurable(t, ffs, durable)
		})
	}
}

// filledEngine opens an engine on ffs (onFail may be nil), applies fillSM's
// 200 keys and flushes them: it returns the engine and the applied index
// made durable.
func filledEngine(t *testing.T, ffs *faultfs.FS, onFail func(error)) (*StateMachine, uint64) {
	t.Helper()
	sm, err := Open(ffs, "sm", 0, 4<<20, nil, onFail)
	if err != nil {
		t.Fatal(err)
	}
	fillSM(t, sm, 200)
	durable, err := sm.FlushDurable()
	if err != nil {
		t.Fatal(err)
	}
	return sm, durable
}

// reopenHoldsDurable clears ffs's fault and reopens the engine's files
// (fillSM's 200 keys) as after a crash: they open at the applied index that
// was durable or later and hold the keys. The engine closes when t ends.
func reopenHoldsDurable(t *testing.T, ffs *faultfs.FS, durable uint64) {
	t.Helper()
	ffs.Set(nil)
	sm, err := Open(ffs, "sm", 0, 4<<20, nil, nil)
	if err != nil {
		t.Fatalf("reopen after the fault cleared: %v", err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	if got := sm.Applied().Index; got < durable {
		t.Fatalf("reopened at applied %d, %d was durable", got, durable)
	}
	for i := 0; i < 200; i += 37 {
		k := fmt.Sprintf("key-%05d", i)
		if _, found, err := Get(sm.DB(), []byte(k)); err != nil || !found {
			t.Fatalf("%s after reopen: %v %v", k, found, err)
		}
	}
}

// TestDirSyncErrorFailsEngine: a directory sync that fails (the device
// full, as torture's nemesis-sdf found: seed 1795570229166824762) fails the
// engine instead of panicking. Pebble panics on one while it moves a
// marker (atomicfs.Marker.Move), which happens in pebble.Open and in a
// background flush, where the panic killed the whole node. Both an open
// and a running engine under the fault end with ErrEngineFailed naming the
// directory, the process goes on, and the files reopen once the fault
// clears.
func TestDirSyncErrorFailsEngine(t *testing.T) {
	dirFault := &faultfs.Rule{Kind: faultfs.WriteError, Match: func(p string) bool { return p == "sm" }}
	t.Run("open", func(t *testing.T) {
		ffs := faultfs.New(vfs.NewMem())
		ffs.Set(dirFault)
		_, err := Open(ffs, "sm", 0, 4<<20, nil, nil)
		if !errors.Is(err, ErrEngineFailed) || !strings.Contains(err.Error(), "sync directory") {
			t.Fatalf("open under a failing directory sync: %v, want ErrEngineFailed naming the directory", err)
		}
		if ffs.Injected() == 0 {
			t.Fatal("the fault never fired")
		}
		ffs.Set(nil)
		sm, _ := filledEngine(t, ffs, nil) // opens once the fault cleared
		if err := sm.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("running", func(t *testing.T) {
		ffs := faultfs.New(vfs.NewMem())
		var told atomic.Int32
		sm, durable := filledEngine(t, ffs, func(error) { told.Add(1) })
		if err := sm.ApplyWrite(durable+1, 1, &kvpb.WriteBatch{Ops: []*kvpb.Op{put("key-late", "late")}}); err != nil {
			t.Fatal(err)
		}
		ffs.Set(dirFault)
		// The flush writes a table and syncs the directory for it.
		if _, err := sm.FlushDurable(); !errors.Is(err, ErrEngineFailed) {
			t.Fatalf("flush under a failing directory sync: %v, want ErrEngineFailed", err)
		}
		<-sm.FailedC()
		if !strings.Contains(sm.Failed().Error(), "sync directory") || told.Load() != 1 {
			t.Fatalf("failure %v (owner told %d times) does not name the directory sync", sm.Failed(), told.Load())
		}
		_ = sm.Close()
		reopenHoldsDurable(t, ffs, durable)
	})
}

// TestWriteErrorWhileOpeningFailsEngine is the regression test of the
// torture harness's KV CORDS cell "pebble WAL / write error", which
// crashed 1 run in 10 under load: pebble.Open replayed the WAL, flushed,
// started a compaction, then failed to create the new WAL; its error path
// closed the file cache under the running compaction, which divided by
// zero. Now every change that fails while Pebble opens fails the engine
// and is swallowed: the open ends with ErrEngineFailed saying what failed
// (never a bare error with work still running), and the files reopen once
// the fault clears.
func TestWriteErrorWhileOpeningFailsEngine(t *testing.T) {
	for _, target := range []string{".log", "MANIFEST"} {
		t.Run(target, func(t *testing.T) {
			ffs := faultfs.New(vfs.NewMem())
			sm, durable := filledEngine(t, ffs, nil)
			if err := sm.Close(); err != nil {
				t.Fatal(err)
			}
			ffs.Set(&faultfs.Rule{Kind: faultfs.WriteError, Match: func(p string) bool { return strings.Contains(p, target) }})
			_, err := Open(ffs, "sm", 0, 4<<20, nil, nil)
			if !errors.Is(err, ErrEngineFailed) || !strings.Contains(err.Error(), "while opening") || ffs.Injected() == 0 {
				t.Fatalf("open under a write error on %s: %v (%d faults injected), want ErrEngineFailed while opening", target, err, ffs.Injected())
			}
			reopenHoldsDurable(t, ffs, durable)
		})
	}
}
