package metalog

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/testseed"
)

var testLayout = onflash.Layout{Geometry: flash.Geometry{Channels: 4, DiesPerChannel: 2, BlocksPerDie: 16, PagesPerBlock: 8, PageSize: 2048, OOBSize: 64}}

// Every record this build writes decodes to itself.
func TestRecordsRoundTrip(t *testing.T) {
	recs := []Record{
		Super{Geometry: testLayout.Geometry, Created: 1234},
		Create{ID: 7, Name: "dir/f", Hint: 2, MTime: -5},
		Rename{ID: 7, Name: "g"},
		Delete{ID: 9},
		Extents{ID: 7, Size: 5000, MTime: 77, Exts: []extmap.Extent{{FilePage: 0, Zone: 8, ZonePage: 3, N: 2, Seq: 40}, {FilePage: 2, Zone: 60, ZonePage: 0, N: 1, Seq: 90}}},
		ZoneReset{Zone: 12, Mask: 1},
		ZoneOpen{Zone: 12, Open: true},
		ZoneOpen{Zone: 13},
		ZoneState{Zone: 14, State: 3},
		FailedDie{Channel: 3, Die: 1},
		CheckpointDone{NextFileID: 10, NextSeq: 91},
	}
	for _, want := range recs {
		typ, body, rest, ok := onflash.NextRecord(want.Record())
		if !ok || len(rest) != 0 {
			t.Fatalf("%#v: record does not frame", want)
		}
		got, err := Decode(testLayout, typ, body)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %#v, %v; want %#v", got, err, want)
		}
	}
}

// Verified records that are impossible for the device are errors, never applied.
func TestDecodeRejectsImpossibleRecords(t *testing.T) {
	other := testLayout
	other.Geometry.BlocksPerDie++
	for _, rec := range []Record{
		Super{Geometry: other.Geometry},
		ZoneReset{Zone: 12, Mask: 1 << 2},
	} {
		typ, body, _, _ := onflash.NextRecord(rec.Record())
		if got, err := Decode(testLayout, typ, body); err == nil {
			t.Errorf("%#v decoded as %#v", rec, got)
		}
	}
	typ, body, _, _ := onflash.NextRecord(Extents{ID: 1, Exts: []extmap.Extent{{Zone: 2, N: 1}}}.Record())
	if got, err := Decode(testLayout, typ, body); err != nil || got.(Extents).Err == nil {
		t.Errorf("an extent in a metadata zone decoded as %#v, %v", got, err)
	}
}

// Three copies of a stream, each damaged in random units (never the same
// unit in all three), merge back to the stream; a unit damaged at other
// bits in every copy is voted back, and one damaged at the same bits in
// every copy loses its page and the pages after it.
func TestMergeAndLatest(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ps := testLayout.Geometry.PageSize
	per := onflash.MetaUnitsPerPage(ps) * onflash.MetaUnitPayload
	var stream []byte
	stream = append(stream, Super{Geometry: testLayout.Geometry}.Record()...)
	for i := 0; i < 400; i++ {
		stream = append(stream, Create{ID: uint64(i + 1), Name: string(rune('a' + i%26))}.Record()...)
	}
	stream = append(stream, CheckpointDone{NextFileID: 401}.Record()...)
	pages := (len(stream) + per - 1) / per
	// build damages unit 0 of page hit in every copy, at byte 100+c of copy
	// c, or at byte 100 of every copy if same.
	build := func(hit int, same bool) []RawPage {
		var raws []RawPage
		for c := 0; c < onflash.MetaCopies; c++ {
			for i := 0; i < pages; i++ {
				data := make([]byte, ps)
				onflash.FillMetaPage(data, 5, uint32(i), stream[i*per:min(len(stream), (i+1)*per)])
				k := rng.Intn(onflash.MetaUnitsPerPage(ps))
				switch {
				case i == hit && same:
					data[100] ^= 0xff
				case i == hit:
					data[100+c] ^= 0xff
				case rng.Intn(2) == 0 && k%onflash.MetaCopies != c: // copy k%MetaCopies keeps unit k
					data[k*onflash.MetaUnitSize+100] ^= 0xff
				}
				raws = append(raws, RawPage{Zone: c, Index: i, Data: data})
			}
		}
		return raws
	}
	if pages < 3 {
		t.Fatalf("the stream fills %d pages, want 3 or more", pages)
	}
	got, ep, err := Latest(Merge(ps, build(-1, false)))
	if err != nil || string(got) != string(stream) || ep.Epoch != 5 || ep.Pages != pages || ep.Lost != 0 {
		t.Fatalf("merged %d bytes of %d, %+v, %v", len(got), len(stream), ep, err)
	}
	got, ep, err = Latest(Merge(ps, build(1, false)))
	if err != nil || string(got) != string(stream) || ep.Voted != 1 {
		t.Fatalf("a unit damaged in every copy at other bits: %d bytes of %d, %+v, %v", len(got), len(stream), ep, err)
	}
	// Page 1 is lost: the stream before it holds no complete checkpoint.
	if _, ep, err := Latest(Merge(ps, build(1, true))); err == nil {
		t.Fatalf("a unit damaged in every copy at the same bits: replayed %+v", ep)
	}
}
