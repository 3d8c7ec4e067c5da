package sdf

import (
	"sort"

	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/journal"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// journalHost is the FS as its journal (internal/sdf/journal) sees it.
type journalHost struct{ fs *FS }

func (h journalHost) Lock()                                         { h.fs.mu.Lock() }
func (h journalHost) Unlock()                                       { h.fs.mu.Unlock() }
func (h journalHost) SnapshotLocked() (super, records, done []byte) { return h.fs.snapshotLocked() }
func (h journalHost) ResetZone(z *zones.Zone) error                 { return h.fs.resetZone(z) }
func (h journalHost) Run(ops []*channels.Op)                        { h.fs.doParallel(ops) }

var _ journal.Host = journalHost{}

// logLocked appends a record to the pending journal. The caller holds fs.mu
// and has already applied the record's effect in memory.
func (fs *FS) logLocked(rec []byte) { fs.jr.LogLocked(rec) }

// flushJournal makes every pending record durable.
func (fs *FS) flushJournal() error {
	// NB: the data pages the records describe are made durable first: a
	// device that can lose completed programs (a file-backed emulated
	// device) could otherwise keep a journal page and lose the data page
	// it maps, which real flash, durable in program order, never does
	// (found by TestPowerLossSDFOnFileDevice: a synced file's page mapped
	// to a torn program).
	if err := fs.syncPrograms(); err != nil {
		return err
	}
	if err := fs.jr.Flush(); err != nil {
		return err
	}
	return fs.syncPrograms()
}

// programSyncer is a device whose completed programs may not survive a
// power loss until it is asked (flash.Emulator.SyncPrograms: a
// file-backed emulated device with Options.PowerSafe).
type programSyncer interface{ SyncPrograms() error }

// syncPrograms makes the device's completed programs durable before a
// sync or a journal flush returns (the doc's "durable when the call
// returns"); a device without SyncPrograms makes them durable on
// completion, as real flash does.
func (fs *FS) syncPrograms() error {
	if s, ok := fs.dev.(programSyncer); ok {
		return s.SyncPrograms()
	}
	return nil
}

// snapshotLocked encodes the whole metadata state as a checkpoint: the
// superblock record, the records of the state (failed dies, zones, files)
// and RecCheckpointDone. The caller holds fs.mu.
func (fs *FS) snapshotLocked() (super, records, done []byte) {
	var out []byte
	super = metalog.Super{Geometry: fs.l.Geometry, Created: fs.created}.Record()
	for _, d := range fs.zones.FailedList() {
		out = append(out, metalog.FailedDie{Channel: d.Channel, Die: d.Die}.Record()...)
	}
	full := fs.l.FullDieMask()
	for _, z := range fs.zones.Data() {
		if m := onflash.MaskOf(z.Dies); m != full {
			out = append(out, zoneResetRecord(z.ID, m)...)
		}
		if z.State == ZoneReadOnly || z.State == ZoneOffline {
			out = append(out, zoneStateRecord(z.ID, z.State)...)
		}
		if z.Unsealed {
			out = append(out, metalog.ZoneOpen{Zone: z.ID, Open: true}.Record()...)
		}
	}
	ids := make([]uint64, 0, len(fs.byID))
	for id, ino := range fs.byID {
		if !ino.unlinked {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		ino := fs.byID[id]
		out = append(out, createRecord(ino)...)
		exts := ino.m.Exts
		for first := true; first || len(exts) > 0; first = false {
			n := min(len(exts), 512)
			out = append(out, extentsRecord(ino, exts[:n])...)
			exts = exts[n:]
		}
	}
	return super, out, metalog.CheckpointDone{NextFileID: fs.nextFileID, NextSeq: fs.nextSeq}.Record()
}

// snapshotStreamLocked is the whole checkpoint as one inline stream (for
// tests). The caller holds fs.mu.
func (fs *FS) snapshotStreamLocked() []byte {
	super, records, done := fs.snapshotLocked()
	return append(append(super, records...), done...)
}

func zoneResetRecord(z int, mask uint64) []byte {
	return metalog.ZoneReset{Zone: z, Mask: mask}.Record()
}

func zoneStateRecord(z int, s ZoneState) []byte {
	return metalog.ZoneState{Zone: z, State: uint64(s)}.Record()
}

func createRecord(ino *inode) []byte {
	return metalog.Create{ID: ino.id, Name: ino.name, Hint: uint64(ino.hint), MTime: ino.mtime}.Record()
}

func extentsRecord(ino *inode, exts []extmap.Extent) []byte {
	return metalog.Extents{ID: ino.id, Size: ino.size, MTime: ino.mtime, Exts: exts}.Record()
}

// MetaLayout is how the metadata journal is stored: every page in copies
// copies, each cut into units of unitBytes bytes (for models of its failure
// probability; OpenInfo.MetaUnits counts the units replayed).
func MetaLayout() (unitBytes, copies int) { return onflash.MetaUnitSize, onflash.MetaCopies }
