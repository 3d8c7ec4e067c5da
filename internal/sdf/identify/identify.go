package identify

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/dieloss"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// Host is the SDF layer as the Identifier sees it.
type Host interface {
	// Lock and Unlock guard the zone and file tables (internal/sdf's
	// FS.mu); the Locked methods are called between them.
	Lock()
	Unlock()
	ZonesLocked() *zones.Table
	// FilesLocked lists every file; FileLocked finds one by ID.
	FilesLocked() []dieloss.File
	FileLocked(id uint64) (dieloss.File, bool)
	// Run executes reads on their channels, every channel at once; it is
	// called without the lock.
	Run(ops []*channels.Op)
}

// Stats reports the work of one identification of lost data.
type Stats struct {
	Method      string // "entrustment" (CDR*), "scan" (IDR or CDR)
	Identifier  reparo.Method
	Window      reparo.Window
	Workers     int
	PagesRead   int // flash pages read (P2L pages)
	ZonesByScan int // zones that fell back to the file-table scan
	Entries     int // mapping entries examined
	Elapsed     time.Duration
}

func (s Stats) String() string {
	return fmt.Sprintf("%s (%s, %d workers): pages read %d, entries %d, zones by scan %d, %v",
		s.Identifier, s.Method, s.Workers, s.PagesRead, s.Entries, s.ZonesByScan, s.Elapsed)
}

// Identifier answers identification requests for one SDF layer.
type Identifier struct {
	host  Host
	l     onflash.Layout
	clock base.Clock

	// mu guards owners: what CDR* read for each failed die. Taken before
	// the host's lock.
	mu     sync.Mutex
	owners map[flash.DieAddr]*entrusted
}

// New returns the Identifier of the layer host, laid out as l; clock times
// the requests (Stats.Elapsed).
func New(host Host, l onflash.Layout, clock base.Clock) *Identifier {
	return &Identifier{host: host, l: l, clock: clock}
}

// Scan is IDR (workers 1) or CDR (a worker per channel), named m in the
// Stats: the files of window w, sorted by ID, are cut into workers
// contiguous regions scanned in parallel.
func (id *Identifier) Scan(d flash.DieAddr, workers int, m reparo.Method, w reparo.Window) ([]dieloss.FileRange, Stats, error) {
	start := id.clock.Now()
	st := Stats{Method: "scan", Identifier: m, Window: w, Workers: workers}
	id.host.Lock()
	pages := id.scanWindowLocked(d, nil, workers, w, &st)
	out := dieloss.Ranges(pages, id.host.FileLocked, int64(id.l.Geometry.PageSize))
	id.host.Unlock()
	st.Elapsed = id.clock.Now().Sub(start)
	return out, st, nil
}

// entrusted is what CDR* learned about one die: every owner entrusted to
// its neighbours, and the zones that need the scan.
type entrusted struct {
	cands     []dieloss.Candidate
	scanZones map[int]bool
	pagesRead int
}

// Entrusted is CDR*: the owners of d's blocks from their neighbours' P2L
// pages (read once per failed die), confirmed against the file table, and
// the scan for the zones whose P2L page could not be read.
func (id *Identifier) Entrusted(d flash.DieAddr, w reparo.Window) ([]dieloss.FileRange, Stats, error) {
	start := id.clock.Now()
	st := Stats{Method: "entrustment", Identifier: reparo.IdentifyCDRStar, Window: w, Workers: id.l.Geometry.Channels}
	id.mu.Lock()
	po := id.owners[d]
	if po == nil {
		po = id.readP2L(d)
		st.PagesRead = po.pagesRead
		if id.owners == nil {
			id.owners = map[flash.DieAddr]*entrusted{}
		}
		// Only a failed die's owners are kept: on a live die they change
		// with every write.
		id.host.Lock()
		if id.host.ZonesLocked().Failed[d] {
			id.owners[d] = po
		}
		id.host.Unlock()
	}
	id.mu.Unlock()
	id.host.Lock()
	pages, entries := dieloss.Confirm(id.host.ZonesLocked(), po.cands, id.host.FileLocked, d, w)
	st.Entries += entries
	st.ZonesByScan = len(po.scanZones)
	if len(po.scanZones) > 0 {
		for f, ps := range id.scanWindowLocked(d, po.scanZones, 1, w, &st) {
			pages[f] = append(pages[f], ps...)
		}
	}
	out := dieloss.Ranges(pages, id.host.FileLocked, int64(id.l.Geometry.PageSize))
	id.host.Unlock()
	st.Elapsed = id.clock.Now().Sub(start)
	return out, st, nil
}

// readP2L reads the owners of every block of die d (dieloss.PlanP2L): one
// P2L page per full zone, read in parallel on the channels holding them,
// and the in-memory lists of zones not yet full.
func (id *Identifier) readP2L(d flash.DieAddr) *entrusted {
	g := id.l.Geometry
	id.host.Lock()
	reads, cands, scan := dieloss.PlanP2L(id.host.ZonesLocked(), d)
	id.host.Unlock()
	po := &entrusted{cands: cands, scanZones: scan}
	ops := make([]*channels.Op, len(reads))
	for i, r := range reads {
		ops[i] = &channels.Op{Kind: channels.Read,
			Addr: flash.PageAddr{Channel: r.Zone.Channel, Die: r.Host, Block: r.Zone.Block, Page: id.l.P2LPage()},
			Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)}
	}
	id.host.Run(ops)
	po.pagesRead = len(ops)
	for i, r := range reads {
		owners, ok := []onflash.Owner(nil), ops[i].Err == nil
		if ok {
			owners, ok = onflash.DecodeP2L(ops[i].Data, r.Zone.ID, d.Die)
		}
		if !ok {
			po.scanZones[r.Zone.ID] = true
			continue
		}
		po.cands = append(po.cands, r.Candidates(owners)...)
	}
	return po
}

// scanWindowLocked returns the mapped file pages on die d of the files in
// window w, restricted to zones in only (nil: all): the files, sorted by ID,
// are cut into `workers` contiguous regions (reparo.Partition)
// scanned in parallel (dieloss.Scan).
func (id *Identifier) scanWindowLocked(d flash.DieAddr, only map[int]bool, workers int, w reparo.Window, st *Stats) map[uint64][]uint64 {
	all := id.host.FilesLocked()
	files := make([]dieloss.File, 0, len(all))
	for _, f := range all {
		if w.Contains(f.ID) {
			files = append(files, f)
		}
	}
	sort.Slice(files, func(a, b int) bool { return files[a].ID < files[b].ID })
	pages, entries := dieloss.ScanParallel(id.host.ZonesLocked(), files, d, only, workers)
	st.Entries += entries
	return pages
}
