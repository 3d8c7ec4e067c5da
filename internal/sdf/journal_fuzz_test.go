package sdf

import (
	"encoding/binary"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// FuzzJournalReplay replays a real checkpoint (a formatted device with two
// files) followed by records built from the fuzz input: record types and
// bodies that verify their CRC but hold any values (what a bug, or a CRC
// collision, would leave). Replay must return an error or a file system
// whose every file reads back as data or an error: never a panic, never a
// hang. Seed corpus in testdata/fuzz/FuzzJournalReplay.
func FuzzJournalReplay(f *testing.F) {
	f.Add([]byte{onflash.RecZoneReset, 2, 20, 3})
	f.Add([]byte{onflash.RecExtents, 10, 1, 0xff, 0x7f, 0, 3, 1, 9, 0, 2, 1})
	f.Add([]byte{onflash.RecZoneState, 2, 9, 5, onflash.RecDelete, 1, 1})
	f.Add([]byte{onflash.RecCreate, 6, 99, 1, 'x', 0, 0, onflash.RecRename, 3, 99, 1, 'y'})
	f.Fuzz(func(t *testing.T, recs []byte) {
		g := flash.SmallGeometry()
		dev, err := flash.NewMemory(g, flash.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		fs, err := Format(dev, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"a", "b"} {
			fl, err := fs.Create(name, Lifetime(i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fl.Write(make([]byte, 3*g.PageSize+100*i)); err != nil {
				t.Fatal(err)
			}
			if err := fl.Close(); err != nil {
				t.Fatal(err)
			}
		}
		fs.mu.Lock()
		stream := fs.snapshotStreamLocked()
		fs.mu.Unlock()
		if err := fs.Close(); err != nil {
			t.Fatal(err)
		}
		// The fuzz input as records: [type, body length, body...]...
		for len(recs) >= 2 {
			n := min(int(recs[1]), len(recs)-2)
			// A record as onflash.RecWriter frames it, the body's bytes as
			// given (uvarints of any value, strings of any length).
			rec := binary.LittleEndian.AppendUint32(nil, uint32(n))
			rec = append(append(rec, recs[0]), recs[2:2+n]...)
			stream = append(stream, binary.LittleEndian.AppendUint32(rec, base.CRC32C(rec[4:]))...)
			recs = recs[2+n:]
		}
		fs2, err := newFS(dev, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer fs2.stopChannels()
		if err := fs2.replay(1, stream); err != nil {
			return
		}
		for _, name := range fs2.List() {
			st, err := fs2.Stat(name)
			if err != nil {
				continue
			}
			_, _, _ = fs2.ReadRaw(name, 0, min(st.Size, 1<<20))
		}
	})
}

// TestZoneResetMaskNamingMissingDieIsCorruption: a journal record (that
// verified) resetting a zone onto a die the device does not have is a
// corruption error at replay, not an index out of range when the zone
// table is rebuilt. Found by FuzzJournalReplay (seed
// testdata/fuzz/FuzzJournalReplay/zone-reset-mask-names-missing-die).
func TestZoneResetMaskNamingMissingDieIsCorruption(t *testing.T) {
	dev, fs := newMem(t, small(), Options{})
	fs.mu.Lock()
	stream := fs.snapshotStreamLocked()
	fs.mu.Unlock()
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	z := onflash.MetaZoneCount + 1
	stream = append(stream, zoneResetRecord(z, 1<<uint(small().DiesPerChannel))...)
	fs2, err := newFS(dev, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.stopChannels()
	if err := fs2.replay(1, stream); !base.IsCorruption(err) {
		t.Fatalf("zone %d reset onto die %d of %d: replay returned %v, want a corruption", z, small().DiesPerChannel, small().DiesPerChannel, err)
	}
}
