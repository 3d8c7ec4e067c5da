package metalog

import (
	"encoding/binary"
	"sort"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// RawPage is one programmed page read from a metadata zone (its content
// even when the device reported it uncorrectable): Index is the page's
// index in its zone, the inverse of onflash.MetaPageAddr.
type RawPage struct {
	Zone, Index int
	Data        []byte
}

// Page is one metadata page found on open: its copies, merged unit by unit.
type Page struct {
	Epoch uint64
	Seq   uint32
	// Payload is the page's slice of the stream, nil when some unit
	// verifies in no copy and no vote rebuilds it.
	Payload []byte
	Zones   []int // zones holding a copy
	// Sure: some unit of some copy verifies (not only a claimed header).
	Sure bool
	// Merged counts units that did not verify in some copy (taken from
	// another); Voted those rebuilt by a bit-by-bit majority vote.
	Merged, Voted int
}

// Scan is what the metadata zones hold.
type Scan struct {
	Pages []Page
	// OldFormat counts pages of the format before units (onflash.MetaMagicV1).
	OldFormat int
	// Unreadable counts pages the device could not return at all (failed
	// die, bad block); the caller that read the pages sets it.
	Unreadable int
}

// Merge merges the copies of every metadata page in raws (pages of
// pageSize bytes, in the order they were read) unit by unit: a unit is
// taken from any copy where it verifies, and a unit that verifies in no
// copy is voted bit by bit over three copies (the result must verify). A
// page copy whose every unit is damaged cannot be told apart and adds
// nothing, except by place: copies of one epoch stand at the same offset
// from its page numbers in every zone, so a copy whose identity was damaged
// still takes part in the vote.
func Merge(pageSize int, raws []RawPage) Scan {
	type pageKey struct {
		epoch uint64
		seq   uint32
	}
	type copyOf struct {
		raw         []byte
		zone, index int
		verified    bool // some unit of this copy verifies (its identity is sure)
	}
	type zonePage struct{ zone, index int }
	var scan Scan
	raw := map[zonePage][]byte{} // every page read, by place
	units := map[pageKey]map[int][]byte{}
	counts := map[pageKey]int{}
	claimed := map[pageKey]map[int]int{} // unit counts claimed by unverified copies
	copies := map[pageKey][]copyOf{}
	per := onflash.MetaUnitsPerPage(pageSize)
	for _, rp := range raws {
		data := rp.Data
		raw[zonePage{rp.Zone, rp.Index}] = data
		// The page's identity is what most of its verifying units say.
		votes := map[pageKey]int{}
		var good []onflash.MetaUnit
		for k := 0; k < per; k++ {
			u, ok := onflash.ParseMetaUnit(data[k*onflash.MetaUnitSize : (k+1)*onflash.MetaUnitSize])
			if !ok || u.Index != k {
				continue
			}
			good = append(good, u)
			votes[pageKey{u.Epoch, u.Seq}]++
		}
		var key pageKey
		switch le := binary.LittleEndian; {
		case len(good) > 0:
			for k, n := range votes {
				if n > votes[key] || (n == votes[key] && (k.epoch > key.epoch || (k.epoch == key.epoch && k.seq > key.seq))) {
					key = k
				}
			}
		case le.Uint32(data) == onflash.MetaMagic:
			// No unit verifies (a one-unit page with a flip, say): go by
			// what unit 0's header claims, so the copy can still take
			// part in a vote; a vote must verify.
			key = pageKey{le.Uint64(data[4:]), le.Uint32(data[12:])}
			if claimed[key] == nil {
				claimed[key] = map[int]int{}
			}
			claimed[key][int(data[17])]++
		case le.Uint32(data) == onflash.MetaMagicV1:
			scan.OldFormat++
			continue
		default:
			continue
		}
		if key.seq == onflash.FillerSeq {
			continue
		}
		copies[key] = append(copies[key], copyOf{data, rp.Zone, rp.Index, len(good) > 0})
		if units[key] == nil {
			units[key] = map[int][]byte{}
		}
		for _, u := range good {
			if (pageKey{u.Epoch, u.Seq}) != key {
				continue
			}
			if n, seen := counts[key]; seen && n != u.Units {
				continue
			}
			counts[key] = u.Units
			units[key][u.Index] = u.Payload
		}
	}
	// Where each epoch's copies start in their zones (a copy on the channel
	// of an earlier one starts after filler pages): page seq of copy c is
	// at index seq+shift in its zone. Used to find, by place, copies of a
	// page whose identity was damaged, for a vote.
	type zoneEpoch struct {
		zone  int
		epoch uint64
	}
	shifts := map[zoneEpoch]int{}
	for key, cs := range copies {
		for _, c := range cs {
			if c.verified {
				shifts[zoneEpoch{c.zone, key.epoch}] = c.index - int(key.seq)
			}
		}
	}
	candidates := func(key pageKey, cs []copyOf) [][]byte {
		var out [][]byte
		have := map[zonePage]bool{}
		for _, c := range cs {
			out = append(out, c.raw)
			have[zonePage{c.zone, c.index}] = true
		}
		for ze, shift := range shifts {
			at := zonePage{ze.zone, int(key.seq) + shift}
			if ze.epoch == key.epoch && !have[at] && raw[at] != nil {
				have[at] = true
				out = append(out, raw[at])
			}
		}
		return out
	}
	for key, cs := range copies {
		p := Page{Epoch: key.epoch, Seq: key.seq}
		seenZone := map[int]bool{}
		for _, c := range cs {
			p.Sure = p.Sure || c.verified
			if !seenZone[c.zone] {
				seenZone[c.zone] = true
				p.Zones = append(p.Zones, c.zone)
			}
		}
		sort.Ints(p.Zones)
		n, ok := counts[key]
		if !ok {
			// No unit of any copy verifies: take the unit count most
			// copies claim, for the vote.
			for units, votes := range claimed[key] {
				if units >= 1 && units <= per && (!ok || votes > claimed[key][n]) {
					n, ok = units, true
				}
			}
		}
		var payload []byte
		for k := 0; ok && k < n; k++ {
			part, have := units[key][k]
			if !have {
				if part, have = onflash.VoteMetaUnit(candidates(key, cs), key.epoch, key.seq, k, n); have {
					p.Voted++
				}
			}
			if !have {
				ok = false
				break
			}
			damaged := len(cs) < onflash.MetaCopies
			for _, c := range cs {
				u, good := onflash.ParseMetaUnit(c.raw[k*onflash.MetaUnitSize : (k+1)*onflash.MetaUnitSize])
				damaged = damaged || !good || u.Epoch != key.epoch || u.Seq != key.seq || u.Index != k
			}
			if damaged {
				p.Merged++
			}
			payload = append(payload, part...)
		}
		if ok {
			p.Payload = payload
			if p.Payload == nil {
				p.Payload = []byte{}
			}
		}
		scan.Pages = append(scan.Pages, p)
	}
	return scan
}

// Epoch says how the epoch replayed on open was assembled.
type Epoch struct {
	Epoch uint64
	Zones []int // zones holding its pages
	// Pages is the number of stream pages replayed; Lost counts pages of
	// the epoch after the first page that could not be assembled (their
	// records are not replayed).
	Pages, Lost   int
	Units         int // units of the pages replayed
	Merged, Voted int
}

// Latest assembles the newest epoch whose checkpoint is complete and
// returns its record stream and how it was assembled. The stream ends at
// the first page no copy gives back.
func Latest(scan Scan) ([]byte, Epoch, error) {
	byEpoch := map[uint64]map[uint32]Page{}
	for _, p := range scan.Pages {
		if byEpoch[p.Epoch] == nil {
			byEpoch[p.Epoch] = map[uint32]Page{}
		}
		byEpoch[p.Epoch][p.Seq] = p
	}
	var epochs []uint64
	for e := range byEpoch {
		epochs = append(epochs, e)
	}
	sort.Slice(epochs, func(a, b int) bool { return epochs[a] > epochs[b] })
	for _, e := range epochs {
		var s []byte
		info := Epoch{Epoch: e}
		zoneSet := map[int]bool{}
		seq := uint32(0)
		for ; ; seq++ {
			p, ok := byEpoch[e][seq]
			if !ok || p.Payload == nil {
				break
			}
			s = append(s, p.Payload...)
			info.Pages++
			info.Units += max(1, (len(p.Payload)+onflash.MetaUnitPayload-1)/onflash.MetaUnitPayload)
			info.Merged += p.Merged
			info.Voted += p.Voted
		}
		for q, p := range byEpoch[e] {
			if q >= seq && (p.Sure || p.Payload != nil) {
				info.Lost++
			}
			for _, z := range p.Zones {
				zoneSet[z] = true
			}
		}
		if onflash.CheckpointComplete(s) {
			for z := range zoneSet {
				info.Zones = append(info.Zones, z)
			}
			sort.Ints(info.Zones)
			return s, info, nil
		}
	}
	if scan.OldFormat > 0 && len(scan.Pages) == 0 {
		return nil, Epoch{}, base.CorruptionErrorf("sdf: the device holds %d metadata pages of an older format (before per-unit checksums): this version cannot read it", scan.OldFormat)
	}
	return nil, Epoch{}, base.CorruptionErrorf("sdf: no complete metadata checkpoint on the device (%d metadata pages found, %d unreadable)", len(scan.Pages), scan.Unreadable)
}

// ParseBodyPage returns the payload of checkpoint body page i of epoch
// when every unit of raw verifies as that page.
func ParseBodyPage(raw []byte, epoch uint64, i int) ([]byte, bool) {
	if raw == nil {
		return nil, false
	}
	e, seq, payload, ok := onflash.ParseMetaPage(raw)
	if !ok || e != epoch || seq != onflash.BodySeq(i) {
		return nil, false
	}
	return payload, true
}

// MergeBodyPage assembles checkpoint body page i of epoch from its copies
// (nil: the copy could not be read) unit by unit: a unit from any copy
// where it verifies, else a bit-by-bit vote over three copies that must
// verify.
func MergeBodyPage(raws [][]byte, epoch uint64, i int) ([]byte, bool) {
	var have [][]byte
	for _, r := range raws {
		if r != nil {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return nil, false
	}
	seq := onflash.BodySeq(i)
	per := len(have[0]) / onflash.MetaUnitSize
	units := -1
	for _, r := range have {
		for k := 0; k < per && units < 0; k++ {
			if u, ok := onflash.ParseMetaUnit(r[k*onflash.MetaUnitSize : (k+1)*onflash.MetaUnitSize]); ok && u.Epoch == epoch && u.Seq == seq && u.Index == k {
				units = u.Units
			}
		}
	}
	if units < 1 {
		return nil, false
	}
	var payload []byte
	for k := 0; k < units; k++ {
		var part []byte
		found := false
		for _, r := range have {
			if u, ok := onflash.ParseMetaUnit(r[k*onflash.MetaUnitSize : (k+1)*onflash.MetaUnitSize]); ok && u.Epoch == epoch && u.Seq == seq && u.Index == k && u.Units == units {
				part, found = u.Payload, true
				break
			}
		}
		if !found {
			if part, found = onflash.VoteMetaUnit(have, epoch, seq, k, units); !found {
				return nil, false
			}
		}
		payload = append(payload, part...)
	}
	return payload, true
}
