package onflash

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/flash"
)

// Fuzz targets for the SDF layer's on-flash decoders: a data page's OOB
// identity, a block's P2L page, metadata journal pages and units, and the
// journal's records. Seed corpora are in testdata/fuzz/; `go test` runs
// them, `flashmend torture fuzz` (or go test -fuzz=FuzzX) explores further.

const fuzzPage = 4096

// fuzzGeometry is the device FuzzRecords checks checkpoint body records
// against.
var fuzzGeometry = flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 16, PageSize: fuzzPage, OOBSize: 128}

// FuzzOOB: a data page's identity round-trips through its OOB, and damage
// to the page or its OOB fails the check (never another identity).
func FuzzOOB(f *testing.F) {
	f.Add([]byte("page data"), uint32(9), uint64(3), uint64(1), uint64(77), []byte{0, 0, 1}, false)
	f.Add([]byte{}, uint32(4096), uint64(1<<40), uint64(5), uint64(1), []byte{40, 0, 0x80}, true)
	f.Fuzz(func(t *testing.T, content []byte, valid uint32, file, page, seq uint64, mask []byte, inOOB bool) {
		data := make([]byte, fuzzPage)
		copy(data, content)
		oob := make([]byte, 64)
		id := PageID{Valid: valid, FileID: file, Page: page, Seq: seq}
		EncodeOOB(oob, data, id)
		got, ok := DecodeOOB(oob, data)
		if !ok || got != id {
			t.Fatalf("round trip: %+v %v, want %+v", got, ok, id)
		}
		target := data
		if inOOB {
			// Only the 36 bytes the layer uses are covered.
			target = oob[:oobSize]
		}
		if bitrot.XORAt(target, mask) {
			if _, ok := DecodeOOB(oob, data); ok {
				t.Fatalf("damaged page (mask %x in oob=%v) verified", mask, inOOB)
			}
		}
	})
}

// FuzzP2L: a P2L page round-trips; a damaged one, one about another zone
// or die, and arbitrary bytes fail or decode to entries that fit the page.
func FuzzP2L(f *testing.F) {
	f.Add(uint32(12), uint8(1), []byte("owners"), []byte{0, 0, 1})
	f.Add(uint32(0), uint8(0), []byte{}, []byte{20, 0, 0xff})
	f.Fuzz(func(t *testing.T, zone uint32, about uint8, ownersRaw []byte, mask []byte) {
		z, d := int(zone%4096), int(about%8)
		var owners []Owner
		for i := 0; i+12 <= len(ownersRaw) && len(owners) < (fuzzPage-p2lHeaderSize)/p2lEntrySize; i += 12 {
			owners = append(owners, Owner{FileID: binary.LittleEndian.Uint64(ownersRaw[i:]), Page: binary.LittleEndian.Uint32(ownersRaw[i+8:])})
		}
		// Arbitrary bytes as a page.
		raw := make([]byte, fuzzPage)
		copy(raw, ownersRaw)
		if got, ok := DecodeP2L(raw, z, d); ok && p2lHeaderSize+len(got)*p2lEntrySize > fuzzPage {
			t.Fatalf("arbitrary page decoded to %d entries", len(got))
		}
		data := make([]byte, fuzzPage)
		EncodeP2L(data, z, d, owners)
		got, ok := DecodeP2L(data, z, d)
		if !ok || len(got) != len(owners) {
			t.Fatalf("round trip: %d owners %v, want %d", len(got), ok, len(owners))
		}
		for i := range got {
			if got[i] != owners[i] {
				t.Fatalf("round trip: owner %d %+v, want %+v", i, got[i], owners[i])
			}
		}
		if _, ok := DecodeP2L(data, z+1, d); ok {
			t.Fatalf("P2L page of zone %d verified as zone %d's", z, z+1)
		}
		if _, ok := DecodeP2L(data, z, d+1); ok {
			t.Fatalf("P2L page about die %d verified as die %d's", d, d+1)
		}
		// The header's first 20 bytes (magic, zone, die, count, CRC) and the
		// entries are covered; damage there fails. (The reserved bytes
		// [20:32] are unused, and so are the bytes after the entries.)
		used := p2lHeaderSize + len(owners)*p2lEntrySize
		before := append([]byte(nil), data...)
		bitrot.XORAt(data[:used], mask)
		if !bytes.Equal(before[:20], data[:20]) || !bytes.Equal(before[p2lHeaderSize:used], data[p2lHeaderSize:used]) {
			if _, ok := DecodeP2L(data, z, d); ok {
				t.Fatalf("damaged P2L page (mask %x) verified", mask)
			}
		}
	})
}

// FuzzMetaPage: a metadata page round-trips; damage to a unit fails that
// unit (and the page) and never yields other payload; arbitrary bytes
// parse without a panic to a payload no longer than a page holds; a unit
// damaged in one of three copies is voted back.
func FuzzMetaPage(f *testing.F) {
	f.Add(uint64(3), uint32(0), []byte("journal records"), []byte{0, 0, 1}, []byte{})
	f.Add(uint64(1), uint32(7), bytes.Repeat([]byte("x"), 3000), []byte{0x00, 0x02, 0xff}, []byte{0x10, 0x02, 0x01})
	f.Fuzz(func(t *testing.T, epoch uint64, seq uint32, payload, m0, m1 []byte) {
		units := MetaUnitsPerPage(fuzzPage)
		payload = payload[:min(len(payload), units*MetaUnitPayload)]
		if _, _, p, ok := ParseMetaPage(append(append([]byte(nil), m0...), make([]byte, fuzzPage)...)[:fuzzPage]); ok && len(p) > units*MetaUnitPayload {
			t.Fatalf("arbitrary page parsed to %d bytes of payload", len(p))
		}
		page := make([]byte, fuzzPage)
		FillMetaPage(page, epoch, seq, payload)
		e, s, got, ok := ParseMetaPage(page)
		if !ok || e != epoch || s != seq || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: epoch %d seq %d ok %v, %d bytes; want %d %d %d bytes", e, s, ok, len(got), epoch, seq, len(payload))
		}
		used := max(1, (len(payload)+MetaUnitPayload-1)/MetaUnitPayload)
		c0 := append([]byte(nil), page...)
		if !bitrot.XORAt(c0[:used*MetaUnitSize], m0) {
			return
		}
		if e2, s2, got2, ok := ParseMetaPage(c0); ok && (e2 != epoch || s2 != seq || !bytes.Equal(got2, payload)) {
			t.Fatalf("damaged page parsed to other content")
		} else if ok {
			t.Fatalf("damaged page (mask %x) verified", m0)
		}
		c1 := append([]byte(nil), page...)
		bitrot.XORAt(c1[:used*MetaUnitSize], m1)
		// Three copies, two damaged in possibly overlapping places: every
		// unit the vote returns is the unit written.
		for k := 0; k < used; k++ {
			want := payload[min(len(payload), k*MetaUnitPayload):min(len(payload), (k+1)*MetaUnitPayload)]
			if got, ok := VoteMetaUnit([][]byte{c0, c1, page}, epoch, seq, k, used); ok && !bytes.Equal(got, want) {
				t.Fatalf("unit %d voted to other bytes", k)
			}
			if got, ok := VoteMetaUnit([][]byte{c0, page, page}, epoch, seq, k, used); !ok || !bytes.Equal(got, want) {
				t.Fatalf("unit %d with one damaged copy of three: vote %v", k, ok)
			}
		}
	})
}

// FuzzRecords: journal records round-trip through Frame/NextRecord and the
// body readers; arbitrary streams split without a panic into records that
// re-frame to the same bytes; a damaged record ends the stream there.
func FuzzRecords(f *testing.F) {
	f.Add(byte(RecCreate), uint64(5), "000123.sst", int64(-7), []byte{}, []byte{0, 0, 1})
	f.Add(byte(RecExtents), uint64(1<<63), "", int64(1<<62), []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5}, []byte{})
	f.Fuzz(func(t *testing.T, typ byte, u uint64, s string, v int64, stream, mask []byte) {
		for rest := stream; ; {
			ty, body, next, ok := NextRecord(rest)
			if !ok {
				break
			}
			var w RecWriter
			w.b = append(w.b, body...)
			if fr := w.Frame(ty); !bytes.Equal(fr, rest[:len(rest)-len(next)]) {
				t.Fatalf("record does not re-frame to its bytes")
			}
			r := NewRecReader(body)
			for r.Err == nil && len(r.b) > 0 {
				_ = r.Str()
				_ = r.Varint()
			}
			// Any verified body as a checkpoint body record: a clean error,
			// or a record that checks against the layout and re-encodes to
			// itself.
			l := Layout{Geometry: fuzzGeometry}
			if b, err := DecodeCheckpointBody(l, body); err == nil {
				for c := range b.Copies {
					for _, run := range b.Copies[c] {
						if run.Zone < MetaZoneCount || run.Zone >= l.Zones() || run.Pages <= 0 {
							t.Fatalf("accepted run %v", run)
						}
					}
				}
				if again, err := DecodeCheckpointBody(l, b.Record()[5:len(b.Record())-4]); err != nil || again.CRC != b.CRC || again.Bytes != b.Bytes || again.Epoch != b.Epoch {
					t.Fatalf("checkpoint body round trip: %+v %v", again, err)
				}
			}
			rest = next
		}
		var w RecWriter
		w.Uvarint(u)
		w.Str(s)
		w.Varint(v)
		rec := w.Frame(typ)
		two := append(append([]byte(nil), rec...), rec...)
		ty, body, rest, ok := NextRecord(two)
		if !ok || ty != typ || !bytes.Equal(rest, rec) {
			t.Fatalf("round trip: type %d ok %v rest %d bytes", ty, ok, len(rest))
		}
		r := NewRecReader(body)
		if gu, gs, gv := r.Uvarint(), r.Str(), r.Varint(); r.Err != nil || gu != u || gs != s || gv != v || len(r.b) != 0 {
			t.Fatalf("body round trip: %d %q %d %v", gu, gs, gv, r.Err)
		}
		if bitrot.XORAt(two[:len(rec)], mask) {
			if ty, body, _, ok := NextRecord(two); ok && (ty != typ || !bytes.Equal(body, rec[5:len(rec)-4])) {
				t.Fatalf("damaged record decoded to other content")
			} else if ok {
				t.Fatalf("damaged record (mask %x) verified", mask)
			}
		}
	})
}

// TestCheckpointBodyRecordRoundTrip: a body record decodes to itself, and
// one naming a metadata zone, a die the device lacks, or pages that do not
// add up to its bytes is a corruption error.
func TestCheckpointBodyRecordRoundTrip(t *testing.T) {
	l := Layout{Geometry: fuzzGeometry}
	per := MetaUnitsPerPage(fuzzPage) * MetaUnitPayload
	b := CheckpointBody{Epoch: 9, Bytes: uint64(3*per + 5), CRC: 0xdeadbeef}
	for c := range b.Copies {
		b.Copies[c] = []BodyRun{{Zone: MetaZoneCount + c, Mask: 3, Pages: 3}, {Zone: 40 + c, Mask: 1, Pages: 1}}
	}
	rec := b.Record()
	got, err := DecodeCheckpointBody(l, rec[5:len(rec)-4])
	if err != nil || got.Epoch != b.Epoch || got.Bytes != b.Bytes || got.CRC != b.CRC || len(got.Copies[2]) != 2 || got.Copies[2][1] != b.Copies[2][1] {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, bad := range map[string]func(*CheckpointBody){
		"metadata zone":   func(b *CheckpointBody) { b.Copies[1][0].Zone = 0 },
		"missing die":     func(b *CheckpointBody) { b.Copies[0][0].Mask = 4 },
		"zone past end":   func(b *CheckpointBody) { b.Copies[0][1].Zone = l.Zones() },
		"run past zone":   func(b *CheckpointBody) { b.Copies[0][1].Pages = 17 },
		"pages for bytes": func(b *CheckpointBody) { b.Bytes += uint64(per) },
	} {
		c := b
		for i := range c.Copies {
			c.Copies[i] = append([]BodyRun(nil), b.Copies[i]...)
		}
		bad(&c)
		rec := c.Record()
		if _, err := DecodeCheckpointBody(l, rec[5:len(rec)-4]); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want a corruption error", name, err)
		}
	}
}
