package kvserver

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
)

// TestSetAsideKeepsOneQuarantine: a replica that fails again and again
// leaves one quarantine of its files (the newest), not one per failure,
// and none when it failed for want of space (the copy would take the room
// its replacement needs); the replicas of other shards keep theirs.
func TestSetAsideKeepsOneQuarantine(t *testing.T) {
	fs := vfs.NewMem()
	clock := base.NewManualClock(time.Unix(1000, 0))
	n := &Node{cfg: Config{FS: fs}}
	n.cfg.Clock = clock
	write := func(dir string) {
		t.Helper()
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(fs.PathJoin(dir, "data"), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("replica files")); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	list := func() []string {
		names, err := fs.List("kv")
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(names)
		return names
	}
	write("kv/shard-2")
	other := ReplicaFailure{Err: fmt.Errorf("engine failed")}
	if err := n.setAside("kv/shard-2", &other); err != nil || other.Quarantine == "" {
		t.Fatalf("shard 2: %v, quarantine %q", err, other.Quarantine)
	}
	var last ReplicaFailure
	for i := 0; i < 3; i++ {
		clock.Advance(time.Second)
		write("kv/shard-1")
		last = ReplicaFailure{Err: fmt.Errorf("failure %d", i)}
		if err := n.setAside("kv/shard-1", &last); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{fs.PathBase(last.Quarantine), fs.PathBase(other.Quarantine)}
	sort.Strings(want)
	if got := list(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("after three failures of shard 1: %v, want %v", got, want)
	}
	// No space: the files are removed, the older quarantine too.
	clock.Advance(time.Second)
	write("kv/shard-1")
	full := ReplicaFailure{Err: fmt.Errorf("raft log: sync: %w", base.ErrNoSpace)}
	if err := n.setAside("kv/shard-1", &full); err != nil || full.Quarantine != "" {
		t.Fatalf("no space: %v, quarantine %q", err, full.Quarantine)
	}
	if got := list(); len(got) != 1 || got[0] != fs.PathBase(other.Quarantine) {
		t.Fatalf("after a no-space failure: %v, want only shard 2's quarantine", got)
	}
}
