package metalog

import (
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// A Record is one journal record, decoded (Decode) or to be written
// (Record). The framing, types and CRC32C are onflash's.
type Record interface {
	// Record encodes the record, framed.
	Record() []byte
}

// Super is the superblock (onflash.RecSuper), the first record of every
// epoch: the format version this build writes and the device's geometry.
type Super struct {
	Geometry flash.Geometry
	Created  int64 // unix ns of Format
}

// Create is a new file (onflash.RecCreate); it replaces a file of that name.
type Create struct {
	ID    uint64
	Name  string
	Hint  uint64 // the lifetime hint
	MTime int64  // unix ns
}

// Rename renames a file (onflash.RecRename), replacing a file of that name.
type Rename struct {
	ID   uint64
	Name string
}

// Delete removes a file (onflash.RecDelete).
type Delete struct{ ID uint64 }

// Extents maps pages of a file and sets its size and modification time
// (onflash.RecExtents). Err, set by Decode, is a malformed extent (no data
// zone, empty): corruption, which the replay reports if the file exists.
type Extents struct {
	ID          uint64
	Size, MTime int64
	Exts        []extmap.Extent
	Err         error
}

// ZoneReset says a data zone was erased and now stripes over the dies of
// Mask (onflash.RecZoneReset).
type ZoneReset struct {
	Zone int
	Mask uint64
}

// ZoneOpen says a data zone takes appends (Open, onflash.RecZoneOpen) or
// that every extent in it is journaled (onflash.RecZoneSealed).
type ZoneOpen struct {
	Zone int
	Open bool
}

// ZoneState is a data zone's state when it is not derived from its pages
// (read-only, offline; onflash.RecZoneState), as the sdf ZoneState value.
type ZoneState struct {
	Zone  int
	State uint64
}

// FailedDie is a die known failed (onflash.RecFailedDie).
type FailedDie struct{ Channel, Die int }

// Body names the checkpoint body that holds the checkpoint's records
// (onflash.RecCheckpointBody).
type Body struct{ onflash.CheckpointBody }

// CheckpointDone ends a checkpoint (onflash.RecCheckpointDone).
type CheckpointDone struct{ NextFileID, NextSeq uint64 }

func dims(g flash.Geometry) [6]int {
	return [6]int{g.Channels, g.DiesPerChannel, g.BlocksPerDie, g.PagesPerBlock, g.PageSize, g.OOBSize}
}

func (s Super) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(onflash.FormatVersion)
	for _, v := range dims(s.Geometry) {
		w.Uvarint(uint64(v))
	}
	w.Varint(s.Created)
	return w.Frame(onflash.RecSuper)
}

func (c Create) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(c.ID)
	w.Str(c.Name)
	w.Uvarint(c.Hint)
	w.Varint(c.MTime)
	return w.Frame(onflash.RecCreate)
}

func (r Rename) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(r.ID)
	w.Str(r.Name)
	return w.Frame(onflash.RecRename)
}

func (d Delete) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(d.ID)
	return w.Frame(onflash.RecDelete)
}

func (x Extents) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(x.ID)
	w.Uvarint(uint64(x.Size))
	w.Varint(x.MTime)
	w.Uvarint(uint64(len(x.Exts)))
	for _, e := range x.Exts {
		w.Uvarint(e.FilePage)
		w.Uvarint(uint64(e.Zone))
		w.Uvarint(uint64(e.ZonePage))
		w.Uvarint(uint64(e.N))
		w.Uvarint(e.Seq)
	}
	return w.Frame(onflash.RecExtents)
}

func (z ZoneReset) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(z.Zone))
	w.Uvarint(z.Mask)
	return w.Frame(onflash.RecZoneReset)
}

func (z ZoneOpen) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(z.Zone))
	if z.Open {
		return w.Frame(onflash.RecZoneOpen)
	}
	return w.Frame(onflash.RecZoneSealed)
}

func (z ZoneState) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(z.Zone))
	w.Uvarint(z.State)
	return w.Frame(onflash.RecZoneState)
}

func (f FailedDie) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(uint64(f.Channel))
	w.Uvarint(uint64(f.Die))
	return w.Frame(onflash.RecFailedDie)
}

func (c CheckpointDone) Record() []byte {
	var w onflash.RecWriter
	w.Uvarint(c.NextFileID)
	w.Uvarint(c.NextSeq)
	return w.Frame(onflash.RecCheckpointDone)
}

// Decode decodes one verified record of type typ for a device of layout l.
// A record that does not decode, or names a zone the device does not have
// where that is harmless, is skipped (nil, nil), as is a type this build
// does not know; a superblock that does not decode or does not match the
// device, and a record that decodes but is impossible (a die mask naming a
// die the device does not have, a bad checkpoint body record), is an error.
func Decode(l onflash.Layout, typ byte, body []byte) (Record, error) {
	r := onflash.NewRecReader(body)
	switch typ {
	case onflash.RecSuper:
		version := r.Uvarint()
		var d [6]int
		for i := range d {
			d[i] = int(r.Uvarint())
		}
		created := r.Varint()
		if r.Err != nil {
			return nil, base.CorruptionErrorf("sdf: superblock: %v", r.Err)
		}
		if version < onflash.MinFormatVersion || version > onflash.FormatVersion {
			return nil, base.InvalidArgumentf("sdf: on-flash format version %d, this build reads %d to %d", version, onflash.MinFormatVersion, onflash.FormatVersion)
		}
		g := l.Geometry
		if d != dims(g) {
			return nil, base.InvalidArgumentf("sdf: device geometry %s differs from the formatted one %v", g, d)
		}
		return Super{Geometry: g, Created: created}, nil
	case onflash.RecCreate:
		c := Create{ID: r.Uvarint(), Name: r.Str(), Hint: r.Uvarint(), MTime: r.Varint()}
		return skipIf(r, c)
	case onflash.RecRename:
		return skipIf(r, Rename{ID: r.Uvarint(), Name: r.Str()})
	case onflash.RecDelete:
		return skipIf(r, Delete{ID: r.Uvarint()})
	case onflash.RecExtents:
		x := Extents{ID: r.Uvarint(), Size: int64(r.Uvarint()), MTime: r.Varint()}
		n := int(r.Uvarint())
		if r.Err != nil {
			return nil, nil
		}
		for i := 0; i < n; i++ {
			e := extmap.Extent{FilePage: r.Uvarint(), Zone: int(r.Uvarint()), ZonePage: int(r.Uvarint()), N: int(r.Uvarint()), Seq: r.Uvarint()}
			if r.Err != nil || e.Zone < onflash.MetaZoneCount || e.Zone >= l.Zones() || e.N <= 0 {
				x.Err = base.CorruptionErrorf("sdf: bad extent record for file %d", x.ID)
				break
			}
			x.Exts = append(x.Exts, e)
		}
		return x, nil
	case onflash.RecZoneReset:
		z := ZoneReset{Zone: int(r.Uvarint()), Mask: r.Uvarint()}
		if r.Err != nil {
			return nil, nil
		}
		if z.Zone < 0 || z.Mask&^l.FullDieMask() != 0 {
			// Verified but impossible (a bug or a checksum collision): a
			// die the device does not have would index past its blocks.
			return nil, base.CorruptionErrorf("sdf: zone reset record for zone %d, die mask %#x (device has %d dies per channel)",
				z.Zone, z.Mask, l.Geometry.DiesPerChannel)
		}
		if z.Zone >= l.Zones() {
			return nil, nil
		}
		return z, nil
	case onflash.RecZoneOpen, onflash.RecZoneSealed:
		z := ZoneOpen{Zone: int(r.Uvarint()), Open: typ == onflash.RecZoneOpen}
		if r.Err != nil || z.Zone < onflash.MetaZoneCount || z.Zone >= l.Zones() {
			return nil, nil
		}
		return z, nil
	case onflash.RecZoneState:
		z := ZoneState{Zone: int(r.Uvarint()), State: r.Uvarint()}
		if r.Err != nil || z.Zone < 0 || z.Zone >= l.Zones() {
			return nil, nil
		}
		return z, nil
	case onflash.RecFailedDie:
		return skipIf(r, FailedDie{Channel: int(r.Uvarint()), Die: int(r.Uvarint())})
	case onflash.RecCheckpointBody:
		b, err := onflash.DecodeCheckpointBody(l, body)
		if err != nil {
			return nil, err
		}
		return Body{b}, nil
	case onflash.RecCheckpointDone:
		return skipIf(r, CheckpointDone{NextFileID: r.Uvarint(), NextSeq: r.Uvarint()})
	}
	return nil, nil
}

// skipIf returns rec, or nothing when it did not decode.
func skipIf(r *onflash.RecReader, rec Record) (Record, error) {
	if r.Err != nil {
		return nil, nil
	}
	return rec, nil
}
