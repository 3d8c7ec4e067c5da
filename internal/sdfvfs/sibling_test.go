package sdfvfs

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/guardfs"
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
		// guardfs's copies of a framed file count from 2 (the file and
		// its shadow are 0 and 1); its sidecars from 0.
		{"db/.guardfs/m.1.0123456789abcdef.MANIFEST-000001", "db/MANIFEST-000001", 2, true},
		{"db/.guardfs/m.2.0123456789abcdef.MANIFEST-000001", "db/MANIFEST-000001", 3, true},
		{"db/.guardfs/s.0.0123456789abcdef.000004.sst", "db/.guardfs/s.000004.sst", 0, true},
		{".guardfs/s.1.0123456789abcdef.000004.sst", ".guardfs/s.000004.sst", 1, true},
		// A restore's temporary belongs where its target does.
		{"db/.guardfs/t.fedcba9876543210.s.1.0123456789abcdef.000004.sst.tmp", "db/.guardfs/s.000004.sst", 1, true},
		{"db/.guardfs/t.fedcba9876543210.MANIFEST-000001.tmp", "db/MANIFEST-000001", 0, true},
		{"db/.guardfs/t.fedcba9876543210.tmp", "", 0, false},
		{"db/.guardfs/x.1.0123456789abcdef.000004.sst", "", 0, false},
		{"db/guardfs/s.1.0123456789abcdef.000004.sst", "", 0, false},
	} {
		g, i, ok := DefaultSiblingCopy(c.path)
		if g != c.group || i != c.index || ok != c.ok {
			t.Errorf("DefaultSiblingCopy(%q) = %q, %d, %v; want %q, %d, %v", c.path, g, i, ok, c.group, c.index, c.ok)
		}
	}
}

// TestNoChannelHoldsEveryCopy: Pebble on guardfs on this FS, the stack a
// KV replica runs on flash. For every sstable, no channel (a zone spans
// every die of its channel) holds the pages of its metadata ranges, its
// range copy and both guardfs sidecars; the sidecars sit on channels
// apart, and so do the MANIFEST, its shadow and guardfs's two copies of
// it. Regression: an sstable's range copy went to the channel with the
// fewest of the table's zones, often the one holding its footer, and the
// sidecars, written one after the other, shared a zone: one failed die
// took every copy of the footer, and the table no longer opened after a
// restart (TestKVOnFlashDieFailure, bad magic number 0).
func TestNoChannelHoldsEveryCopy(t *testing.T) {
	const seed = 31
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{MetadataRanges: SSTMetadataRanges(sstable.ReaderOptions{})})
	gfs, err := guardfs.New(fs, guardfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := &pebble.Options{FS: gfs, MemTableSize: 4 << 20, Logger: quietLogger{t}}
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	for round := 0; round < 12; round++ {
		// Tables of a few pages to several zones (a zone is 62 pages
		// here): their metadata lands on every channel in turn, and
		// many span every channel.
		n := 50 + rng.Intn(6000)
		for i := 0; i < n; i++ {
			if err := db.Set([]byte(fmt.Sprintf("key-%02d-%06d", round, i)), bytes.Repeat([]byte{byte(i)}, 100+rng.Intn(200)), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	channelsOf := func(name string) map[int]bool {
		t.Helper()
		f, err := fs.sfs.OpenFile(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer f.Close()
		out := map[int]bool{}
		for c, n := range fs.sfs.RangeChannels(f, 0, f.Size()) {
			if n > 0 {
				out[c] = true
			}
		}
		return out
	}
	names := fs.sfs.List()
	checked := 0
	for _, sst := range names {
		if !strings.HasPrefix(sst, "db/") || !strings.HasSuffix(sst, ".sst") || strings.Contains(sst, guardfs.ReservedDir) {
			continue
		}
		rs, err := fs.DuplicatedRanges(sst)
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s has no range copy: %v", sst, err)
		}
		f, err := fs.sfs.OpenFile(sst)
		if err != nil {
			t.Fatal(err)
		}
		meta := map[int]bool{}
		for _, r := range rs {
			for c, n := range fs.sfs.RangeChannels(f, r.Off, r.Len) {
				if n > 0 {
					meta[c] = true
				}
			}
		}
		t.Logf("%s: %d B in zones %v, metadata %v on channels %v", sst, f.Size(), f.Stat().Zones, rs, meta)
		_ = f.Close()
		copies := []map[int]bool{meta, channelsOf(rangesName(sst))}
		if len(meta) < testGeometry().Channels {
			for c := range copies[1] {
				if meta[c] {
					t.Errorf("%s: its range copy is on channel %d, which holds its metadata pages (on %v)", sst, c, meta)
				}
			}
		}
		var sidecars []string
		for _, n := range names {
			if copyOfName(n, "s", baseName(sst)) {
				sidecars = append(sidecars, n)
				copies = append(copies, channelsOf(n))
			}
		}
		if len(sidecars) != 2 {
			t.Fatalf("%s: sidecars %v, want 2", sst, sidecars)
		}
		for c := range copies[2] {
			if copies[3][c] {
				t.Errorf("%s: both sidecars on channel %d: %v", sst, c, sidecars)
			}
		}
		for c := 0; c < testGeometry().Channels; c++ {
			survives := false
			for _, cp := range copies {
				survives = survives || !cp[c]
			}
			if !survives {
				t.Errorf("%s: channel %d holds every copy of its metadata (table %v, range copy %v, sidecars %v)", sst, c, copies[0], copies[1], copies[2:])
			}
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d sstables checked", checked)
	}
	// The MANIFEST: the file, its shadow and guardfs's copies m.1 and m.2,
	// each whole on a channel of its own.
	for _, n := range names {
		if !strings.HasPrefix(n, "db/MANIFEST-") {
			continue
		}
		copies := []string{n, shadowName(n)}
		for _, m := range names {
			if copyOfName(m, "m", baseName(n)) {
				copies = append(copies, m)
			}
		}
		if len(copies) != 4 {
			t.Fatalf("%s: copies %v, want 4", n, copies)
		}
		seen := map[int]string{}
		for _, cp := range copies {
			for c := range channelsOf(cp) {
				if other, ok := seen[c]; ok {
					t.Errorf("%s and %s share channel %d", other, cp, c)
				}
				seen[c] = cp
			}
		}
	}
	t.Logf("%d sstables and their copies checked", checked)
}

// copyOfName reports whether path is db/.guardfs/<kind>.<k>.<id>.<name>.
func copyOfName(path, kind, name string) bool {
	rest, ok := strings.CutPrefix(path, "db/"+guardfs.ReservedDir+"/"+kind+".")
	parts := strings.SplitN(rest, ".", 3)
	return ok && len(parts) == 3 && parts[2] == name
}
