package metalog

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// Tables is the metadata state a journal epoch replays to (Replay): the
// file table, the journaled zone records and the failed dies. The zone
// table proper (write pointers, states of zones whose state is not
// journaled) is derived from the device's block state by the caller
// (internal/sdf/zones.Table.Rebuild).
type Tables struct {
	Created int64 // unix ns of Format
	// Files and Names are the file table by ID and by name. A name and an
	// ID normally lead to one entry; a create reusing a live file's ID
	// (a damaged journal) leaves the older entry reachable by its name
	// only, as it was in memory when the records were written.
	Files               map[uint64]*File
	Names               map[string]*File
	NextFileID, NextSeq uint64
	// Masks are the die sets journaled for data zones (zones absent:
	// every die); States the journaled states (read-only, offline) as
	// sdf/zones.State values.
	Masks  map[int]uint64
	States map[int]uint64
	// Unsealed is each zone's last open (true), seal or reset (false)
	// record: a zone left unsealed may hold synced pages whose extents
	// were never journaled (Recover).
	Unsealed map[int]bool
	Failed   []flash.DieAddr // in the order journaled, without repeats
	// Body is the checkpoint body the epoch named, nil when its checkpoint
	// was inline.
	Body *onflash.CheckpointBody
}

// File is one file of the table.
type File struct {
	ID    uint64
	Name  string
	Hint  uint64 // the lifetime hint
	MTime int64  // unix ns
	Size  int64
	Map   extmap.Map
}

// Replay applies the records of epoch's stream (every record verified its
// CRC32C; onflash.NextRecord ends the stream at the first that does not)
// in order to empty tables, reading the checkpoint body a
// onflash.RecCheckpointBody record names with readBody and applying its
// records in that record's place. The epoch must start with a
// superblock. A record that is impossible for the device (metalog.Decode),
// a second checkpoint body, a superblock or body record inside a body, or
// body bytes that are no record is a corruption error.
func Replay(l onflash.Layout, epoch uint64, stream []byte, readBody func(onflash.CheckpointBody) ([]byte, error)) (*Tables, error) {
	r := &replayer{l: l, readBody: readBody, t: &Tables{
		Files: map[uint64]*File{}, Names: map[string]*File{}, NextFileID: 1, NextSeq: 1,
		Masks: map[int]uint64{}, States: map[int]uint64{}, Unsealed: map[int]bool{},
	}, failed: map[flash.DieAddr]bool{}}
	sawSuper := false
	if _, err := r.applyAll(stream, func(typ byte) error {
		sawSuper = sawSuper || typ == onflash.RecSuper
		return nil
	}); err != nil {
		return nil, err
	}
	if !sawSuper {
		return nil, base.CorruptionErrorf("sdf: metadata epoch %d has no superblock", epoch)
	}
	return r.t, nil
}

type replayer struct {
	l        onflash.Layout
	t        *Tables
	failed   map[flash.DieAddr]bool
	readBody func(onflash.CheckpointBody) ([]byte, error)
}

// applyAll applies the records of stream in order, each after check
// accepts its type, up to the first that does not verify, and returns the
// bytes from there.
func (r *replayer) applyAll(stream []byte, check func(typ byte) error) ([]byte, error) {
	for {
		typ, body, rest, ok := onflash.NextRecord(stream)
		if !ok {
			return stream, nil
		}
		if err := check(typ); err != nil {
			return stream, err
		}
		if err := r.apply(typ, body); err != nil {
			return stream, err
		}
		stream = rest
	}
}

// unlink removes f from the table.
func (r *replayer) unlink(f *File) {
	if r.t.Names[f.Name] == f {
		delete(r.t.Names, f.Name)
	}
	delete(r.t.Files, f.ID)
}

// apply replays one record.
func (r *replayer) apply(typ byte, body []byte) error {
	t := r.t
	if typ == onflash.RecCheckpointBody && t.Body != nil {
		return base.CorruptionErrorf("sdf: a second checkpoint body record in one epoch")
	}
	rec, err := Decode(r.l, typ, body)
	if err != nil {
		return err
	}
	switch x := rec.(type) {
	case Super:
		t.Created = x.Created
	case Create:
		if old := t.Names[x.Name]; old != nil {
			r.unlink(old)
		}
		f := &File{ID: x.ID, Name: x.Name, Hint: x.Hint, MTime: x.MTime}
		t.Names[x.Name], t.Files[x.ID] = f, f
		t.NextFileID = max(t.NextFileID, x.ID+1)
	case Rename:
		f := t.Files[x.ID]
		if f == nil {
			return nil
		}
		if old := t.Names[x.Name]; old != nil && old != f {
			r.unlink(old)
		}
		delete(t.Names, f.Name)
		f.Name = x.Name
		t.Names[x.Name] = f
	case Delete:
		if f := t.Files[x.ID]; f != nil {
			r.unlink(f)
		}
	case Extents:
		f := t.Files[x.ID]
		if f == nil {
			return nil
		}
		for _, e := range x.Exts {
			f.Map.Put(e, nil)
			t.NextSeq = max(t.NextSeq, e.Seq+uint64(e.N))
		}
		if x.Err != nil {
			return x.Err
		}
		f.Size, f.MTime = x.Size, x.MTime
	case ZoneReset:
		t.Masks[x.Zone] = x.Mask
		delete(t.States, x.Zone)
		t.Unsealed[x.Zone] = false
	case ZoneOpen:
		t.Unsealed[x.Zone] = x.Open
	case ZoneState:
		t.States[x.Zone] = x.State
	case FailedDie:
		d := flash.DieAddr{Channel: x.Channel, Die: x.Die}
		if !r.failed[d] {
			r.failed[d] = true
			t.Failed = append(t.Failed, d)
		}
	case Body:
		return r.applyBody(x.CheckpointBody)
	case CheckpointDone:
		t.NextFileID = max(t.NextFileID, x.NextFileID)
		t.NextSeq = max(t.NextSeq, x.NextSeq)
	}
	return nil
}

// applyBody reads the checkpoint body b and applies its records in the
// place of the record that names it.
func (r *replayer) applyBody(b onflash.CheckpointBody) error {
	stream, err := r.readBody(b)
	if err != nil {
		return err
	}
	r.t.Body = &b
	rest, err := r.applyAll(stream, func(typ byte) error {
		if typ == onflash.RecSuper || typ == onflash.RecCheckpointBody {
			return base.CorruptionErrorf("sdf: checkpoint body of epoch %d holds a record of type %d", b.Epoch, typ)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		// The body verified as a whole (CRC32C): a record that does
		// not is a bug, not damage.
		return base.CorruptionErrorf("sdf: checkpoint body of epoch %d: %d bytes of it are no record", b.Epoch, len(rest))
	}
	return nil
}

// Found is a verified data page read on open from a zone left unsealed:
// its OOB identity, and where it is (data page ZonePage of Zone).
type Found struct {
	ID             onflash.PageID
	Zone, ZonePage int
}

// Recover maps the pages found in the zones left unsealed that were
// synced but whose extents never reached the journal, and returns how many
// it mapped. A page is taken if its file exists and its sequence number is
// newer than the page's mapping, and it either replaces a page within the
// file or extends the file contiguously (a crash in the middle of a batch
// can leave later pages without earlier ones; those are not taken, so no
// hole is ever read as data); the newest version of the last page, or the
// page after it, sets the file's size (appends only grow a page's valid
// bytes). NextSeq moves past every page found, taken or not. found is in
// the order the pages were read.
func (t *Tables) Recover(found []Found, pageSize int) int {
	perFile := map[uint64][]Found{}
	for _, f := range found {
		t.NextSeq = max(t.NextSeq, f.ID.Seq+1)
		perFile[f.ID.FileID] = append(perFile[f.ID.FileID], f)
	}
	ps := int64(pageSize)
	n := 0
	for id, cs := range perFile {
		f := t.Files[id]
		if f == nil {
			continue
		}
		sort.Slice(cs, func(a, b int) bool {
			if cs[a].ID.Page != cs[b].ID.Page {
				return cs[a].ID.Page < cs[b].ID.Page
			}
			return cs[a].ID.Seq < cs[b].ID.Seq
		})
		for _, c := range cs {
			endPage := uint64((f.Size + ps - 1) / ps)
			if c.ID.Page > endPage || (c.ID.Page == endPage && f.Size%ps != 0) {
				break // a hole, or an extension after a partial page
			}
			if cur, ok := f.Map.Find(c.ID.Page); ok && cur.Seq+(c.ID.Page-cur.FilePage) >= c.ID.Seq {
				continue
			}
			f.Map.Put(extmap.Extent{FilePage: c.ID.Page, Zone: c.Zone, ZonePage: c.ZonePage, N: 1, Seq: c.ID.Seq}, nil)
			if c.ID.Page+1 >= endPage {
				f.Size = int64(c.ID.Page)*ps + int64(c.ID.Valid)
			}
			n++
		}
	}
	return n
}

// String prints the tables in a stable order (for golden files).
func (t *Tables) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "created %d next file %d next seq %d\n", t.Created, t.NextFileID, t.NextSeq)
	ids := make([]uint64, 0, len(t.Files))
	for id := range t.Files {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		f := t.Files[id]
		fmt.Fprintf(&b, "file %d %q hint %d mtime %d size %d:", f.ID, f.Name, f.Hint, f.MTime, f.Size)
		for _, e := range f.Map.Exts {
			fmt.Fprintf(&b, " %s", e)
		}
		b.WriteString("\n")
	}
	names := make([]string, 0, len(t.Names))
	for n := range t.Names {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if f := t.Names[n]; t.Files[f.ID] != f {
			fmt.Fprintf(&b, "name %q: file %d reachable by name only\n", n, f.ID)
		}
	}
	zonesOf := func(m map[int]uint64) []int {
		var zs []int
		for z := range m {
			zs = append(zs, z)
		}
		sort.Ints(zs)
		return zs
	}
	for _, z := range zonesOf(t.Masks) {
		fmt.Fprintf(&b, "zone %d dies %#x\n", z, t.Masks[z])
	}
	for _, z := range zonesOf(t.States) {
		fmt.Fprintf(&b, "zone %d state %d\n", z, t.States[z])
	}
	var us []int
	for z := range t.Unsealed {
		us = append(us, z)
	}
	sort.Ints(us)
	for _, z := range us {
		fmt.Fprintf(&b, "zone %d unsealed %v\n", z, t.Unsealed[z])
	}
	for _, d := range t.Failed {
		fmt.Fprintf(&b, "failed die %s\n", d)
	}
	if t.Body != nil {
		fmt.Fprintf(&b, "body epoch %d bytes %d\n", t.Body.Epoch, t.Body.Bytes)
	}
	return b.String()
}
