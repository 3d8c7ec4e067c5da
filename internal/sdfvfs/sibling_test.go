package sdfvfs

import (
	"bytes"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
)

// TestSiblingCopiesOnChannelsApart: the two copies internal/raftlog keeps of
// a generation (written as .tmp files, then renamed) are pinned to channels
// apart, so no die holds a page of both; with UnpinnedCopies they are not.
func TestSiblingCopiesOnChannelsApart(t *testing.T) {
	for _, unpinned := range []bool{false, true} {
		dev := memDevice(t, flash.Options{Seed: 7})
		fs := mount(t, dev, false, Options{UnpinnedCopies: unpinned})
		if err := fs.MkdirAll("raft", 0o755); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("raft entries "), 40_000)
		apart := true
		for gen := 1; gen <= 6; gen++ {
			for i := 0; i < 2; i++ {
				name := "raft/raftlog-00000" + string(rune('0'+gen)) + "." + string(rune('0'+i))
				mustCreate(t, fs, name+".tmp", data)
				if err := fs.Rename(name+".tmp", name); err != nil {
					t.Fatal(err)
				}
			}
			a, err := fs.Placement("raft/raftlog-00000" + string(rune('0'+gen)) + ".0")
			if err != nil {
				t.Fatal(err)
			}
			b, err := fs.Placement("raft/raftlog-00000" + string(rune('0'+gen)) + ".1")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range a.PrimaryChannels {
				for _, d := range b.PrimaryChannels {
					if c == d {
						apart = false
						if !unpinned {
							t.Fatalf("generation %d: copies share channel %d: %v and %v", gen, c, a.PrimaryChannels, b.PrimaryChannels)
						}
					}
				}
			}
		}
		if unpinned && apart {
			t.Logf("unpinned copies happened to stay apart on this seed")
		}
	}
}

func TestDefaultSiblingCopy(t *testing.T) {
	for _, c := range []struct {
		path, group string
		index       int
		ok          bool
	}{
		{"kv/r1/raft/raftlog-000012.0", "kv/r1/raft/raftlog-000012", 0, true},
		{"kv/r1/raft/raftlog-000012.1.tmp", "kv/r1/raft/raftlog-000012", 1, true},
		{"raftlog-7.1", "raftlog-7", 1, true},
		{"raftlog-000012.2", "", 0, false},
		{"raftlog-00x012.0", "", 0, false},
		{"raftlog-.0", "", 0, false},
		{"db/000012.sst", "", 0, false},
		{"MANIFEST-000001", "", 0, false},
	} {
		g, i, ok := DefaultSiblingCopy(c.path)
		if g != c.group || i != c.index || ok != c.ok {
			t.Errorf("DefaultSiblingCopy(%q) = %q, %d, %v; want %q, %d, %v", c.path, g, i, ok, c.group, c.index, c.ok)
		}
	}
}
