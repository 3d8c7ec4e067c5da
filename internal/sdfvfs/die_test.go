package sdfvfs

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/flashmend/flashmend/internal/flash"
)

// TestManifestSurvivesChannelFailure fails every die of the channel holding
// the MANIFEST: its shadow, pinned to another channel, still opens the store
// (DIRECT policy 2 with the copy on other dies).
func TestManifestSurvivesChannelFailure(t *testing.T) {
	const seed, n = 41, 5_000
	t.Logf("seed %d", seed)
	dev := memDevice(t, flash.Options{Seed: seed})
	fs := mount(t, dev, false, Options{})
	o := pebbleOptions(t, fs)
	db, err := pebble.Open("db", o)
	if err != nil {
		t.Fatal(err)
	}
	writeKeys(t, db, n, 500, 1) // stays in the memtable and the WAL
	fs = remount(t, db, fs, dev, Options{})
	manifests := listWithPrefix(t, fs, "db", "MANIFEST-")
	pl, err := fs.Placement(manifests[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", pl)
	if !pl.Apart() || len(pl.PrimaryChannels) != 1 {
		t.Fatalf("placement: %s", pl)
	}
	// Keep the failure to the MANIFEST: no other Pebble file may share its
	// channel, or the store is lost for other reasons.
	for _, name := range mustListNames(t, fs, "db") {
		p, err := fs.Placement(name)
		if err != nil || name == manifests[0] {
			continue
		}
		for _, c := range p.PrimaryChannels {
			if c == pl.PrimaryChannels[0] {
				t.Skipf("%s shares the MANIFEST's channel %d; seed %d does not isolate it", name, c, seed)
			}
		}
	}
	if err := fs.SDF().Close(); err != nil {
		t.Fatal(err)
	}
	for d := 0; d < dev.Geometry().DiesPerChannel; d++ {
		if err := dev.FailDie(flash.DieAddr{Channel: pl.PrimaryChannels[0], Die: d}); err != nil {
			t.Fatal(err)
		}
	}
	fs = mount(t, dev, true, Options{})
	db, err = pebble.Open("db", pebbleOptions(t, fs))
	if err != nil {
		t.Fatalf("open with the MANIFEST's channel failed: %v (%s)", err, fs.Stats())
	}
	checkKeys(t, db, n, 1)
	st := fs.Stats()
	t.Logf("vfs: %s", st)
	if st.CopyReads == 0 {
		t.Fatalf("MANIFEST not read from its shadow: %s", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustListNames(t *testing.T, fs *FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = fs.PathJoin(dir, n)
	}
	return names
}

// TestFailover: when the channel of a duplicated file fails while the file
// is being written, its shadow takes over (the file goes on, no copy);
// when the shadow's channel fails, the shadow is dropped. Either way every
// acknowledged byte stays readable.
func TestFailover(t *testing.T) {
	for _, failShadow := range []bool{false, true} {
		t.Run(map[bool]string{false: "primary", true: "shadow"}[failShadow], func(t *testing.T) {
			dev := memDevice(t, flash.Options{Seed: 42})
			fs := mount(t, dev, false, Options{})
			f, err := fs.Create("MANIFEST-000001", "pebble-manifest")
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			write := func(n int) {
				t.Helper()
				b := bytes.Repeat([]byte{byte(len(want))}, n)
				if _, err := f.Write(b); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				want = append(want, b...)
			}
			write(10_000)
			pl, err := fs.Placement("MANIFEST-000001")
			if err != nil {
				t.Fatal(err)
			}
			ch := pl.PrimaryChannels[0]
			if failShadow {
				ch = pl.CopyChannels[0]
			}
			for d := 0; d < dev.Geometry().DiesPerChannel; d++ {
				if err := dev.FailDie(flash.DieAddr{Channel: ch, Die: d}); err != nil {
					t.Fatal(err)
				}
			}
			write(20_000)
			write(5_000)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			st := fs.Stats()
			t.Logf("%s; vfs %s", pl, st)
			if failShadow && (st.CopyErrors != 1 || st.Failovers != 0) || !failShadow && st.Failovers != 1 {
				t.Fatalf("stats: %s", st)
			}
			if pl, _ := fs.Placement("MANIFEST-000001"); pl.CopyZones != nil {
				t.Fatalf("copy left: %s", pl)
			}
			// Bytes written before the failure on the failed channel are
			// lost with it, unless the other copy serves them.
			if got := readAll(t, fs, "MANIFEST-000001"); !bytes.Equal(got, want) {
				t.Fatalf("content after failover: %d bytes, want %d", len(got), len(want))
			}
		})
	}
}
