package sdf

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// FileRange is a byte range of a file.
type FileRange struct {
	Name   string
	FileID uint64
	Off    int64
	Len    int64
}

func (r FileRange) String() string {
	return fmt.Sprintf("%s[%d,%d)", r.Name, r.Off, r.Off+r.Len)
}

// IdentifyStats reports the work of one identification of lost data.
type IdentifyStats struct {
	Method      string // "entrustment" (CDR*), "scan" (IDR or CDR)
	Identifier  reparo.Method
	Window      reparo.Window
	Workers     int
	PagesRead   int // flash pages read (P2L pages)
	ZonesByScan int // zones that fell back to the file-table scan
	Entries     int // mapping entries examined
	Elapsed     time.Duration
}

func (s IdentifyStats) String() string {
	return fmt.Sprintf("%s (%s, %d workers): pages read %d, entries %d, zones by scan %d, %v",
		s.Identifier, s.Method, s.Workers, s.PagesRead, s.Entries, s.ZonesByScan, s.Elapsed)
}

func errOutOfRange(d flash.DieAddr) error {
	return base.InvalidArgumentf("sdf: die %s out of range", d)
}

// LostRanges lists the live file ranges stored on die d with CDR* (block-level
// P2L entrustment), over the whole logical space.
func (fs *FS) LostRanges(d flash.DieAddr) ([]FileRange, IdentifyStats, error) {
	return fs.Identify(d, reparo.IdentifyCDRStar, reparo.All)
}

// LostRangesScan lists the live file ranges on die d with the CDR scan (the
// file table split among Options.ScanWorkers workers). It is the reference
// for LostRanges.
func (fs *FS) LostRangesScan(d flash.DieAddr) ([]FileRange, IdentifyStats, error) {
	return fs.identifyScan(d, fs.opts.ScanWorkers, reparo.IdentifyCDR, reparo.All)
}

// Identify lists the live file ranges stored on die d whose files are in
// window w (Reparo's Identifier answering get_lba_status for one bounded
// range of the logical space, section 4.2.2), with method m:
//
//   - reparo.IdentifyIDR: one worker scans the file table's extents.
//   - reparo.IdentifyCDR: the file table is split by file ID into one
//     region per channel, scanned in parallel (section 5.1).
//   - reparo.IdentifyCDRStar: block-level P2L entrustment (section 6.2): for
//     every zone with a block on d, one page is read, the last page of the
//     neighbouring die's block, which lists the owners of d's block. The
//     owners are read once per die and kept (the paper marks the failed
//     entries in its map, section 6.3), so later windows read no flash;
//     every candidate is checked against the file table at query time.
//     Zones not yet full use the owner list kept in memory; a zone whose
//     P2L page cannot be read falls back to the scan.
//
// All three return the same ranges, sorted by file ID and offset, adjacent
// pages merged. The die need not have failed (the ranges are what its loss
// would lose).
func (fs *FS) Identify(d flash.DieAddr, m reparo.Method, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	g := fs.l.Geometry
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return nil, IdentifyStats{}, errOutOfRange(d)
	}
	if w.To != 0 && w.To <= w.From {
		return nil, IdentifyStats{}, base.InvalidArgumentf("sdf: empty identifier window [%d, %d)", w.From, w.To)
	}
	switch m {
	case reparo.IdentifyIDR:
		return fs.identifyScan(d, 1, m, w)
	case reparo.IdentifyCDR:
		return fs.identifyScan(d, min(g.Channels, 256), m, w)
	case reparo.IdentifyCDRStar:
		return fs.identifyP2L(d, w)
	}
	return nil, IdentifyStats{}, base.InvalidArgumentf("sdf: unknown identifier %v", m)
}

func (fs *FS) identifyScan(d flash.DieAddr, workers int, m reparo.Method, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	start := fs.opts.Clock.Now()
	st := IdentifyStats{Method: "scan", Identifier: m, Window: w, Workers: workers}
	fs.mu.Lock()
	pages := fs.scanWindowLocked(d, nil, workers, w, &st)
	out := fs.rangesLocked(pages)
	fs.mu.Unlock()
	st.Elapsed = fs.opts.Clock.Now().Sub(start)
	return out, st, nil
}

// p2lCand is one owner read from a P2L page (or a zone's in-memory list):
// the page at zonePage of zone was written for owner o.
type p2lCand struct {
	zone, zonePage int
	o              onflash.Owner
}

// p2lOwners is what CDR* learned about one die: every owner entrusted to
// its neighbours, and the zones that need the scan.
type p2lOwners struct {
	cands     []p2lCand
	scanZones map[int]bool
	pagesRead int
}

func (fs *FS) identifyP2L(d flash.DieAddr, w reparo.Window) ([]FileRange, IdentifyStats, error) {
	start := fs.opts.Clock.Now()
	st := IdentifyStats{Method: "entrustment", Identifier: reparo.IdentifyCDRStar, Window: w, Workers: fs.l.Geometry.Channels}
	fs.p2lMu.Lock()
	po := fs.p2l[d]
	if po == nil {
		po = fs.readP2L(d)
		st.PagesRead = po.pagesRead
		if fs.p2l == nil {
			fs.p2l = map[flash.DieAddr]*p2lOwners{}
		}
		// Only a failed die's owners are kept: on a live die they change
		// with every write.
		fs.mu.Lock()
		if fs.zones.Failed[d] {
			fs.p2l[d] = po
		}
		fs.mu.Unlock()
	}
	fs.p2lMu.Unlock()
	fs.mu.Lock()
	pages := map[uint64][]uint64{} // file ID -> lost file pages
	for _, c := range po.cands {
		st.Entries++
		if c.o.FileID == 0 || !w.Contains(c.o.FileID) {
			continue
		}
		ino := fs.byID[c.o.FileID]
		if ino == nil {
			continue
		}
		z := fs.zones.All[c.zone]
		e, ok := ino.m.Find(uint64(c.o.Page))
		if ok && e.Zone == c.zone && e.ZonePage+int(uint64(c.o.Page)-e.FilePage) == c.zonePage &&
			len(z.Dies) > 0 && z.Dies[c.zonePage%len(z.Dies)] == d.Die {
			pages[ino.id] = append(pages[ino.id], uint64(c.o.Page))
		}
	}
	st.ZonesByScan = len(po.scanZones)
	if len(po.scanZones) > 0 {
		for id, ps := range fs.scanWindowLocked(d, po.scanZones, 1, w, &st) {
			pages[id] = append(pages[id], ps...)
		}
	}
	out := fs.rangesLocked(pages)
	fs.mu.Unlock()
	st.Elapsed = fs.opts.Clock.Now().Sub(start)
	return out, st, nil
}

// readP2L reads the owners of every block of die d: one P2L page per full
// zone, read in parallel on the channels holding them, and the in-memory
// lists of zones not yet full.
func (fs *FS) readP2L(d flash.DieAddr) *p2lOwners {
	g := fs.l.Geometry
	po := &p2lOwners{scanZones: map[int]bool{}}
	type p2lRead struct {
		z  *zones.Zone
		di int // d's position in the stripe
		w  int
		op *channels.Op
	}
	var reads []p2lRead
	fs.mu.Lock()
	for b := 0; b < g.BlocksPerDie; b++ {
		z := fs.zones.OnChannel(d.Channel, b)
		if z.Meta || z.WP == 0 || z.State == ZoneEmpty || z.State == ZoneOffline {
			continue
		}
		di := z.DieIndex(d.Die)
		if di < 0 {
			continue
		}
		w := len(z.Dies)
		if z.P2L {
			host, _ := z.EntrustedTo(d.Die)
			reads = append(reads, p2lRead{z: z, di: di, w: w, op: &channels.Op{Kind: channels.Read,
				Addr: flash.PageAddr{Channel: z.Channel, Die: host, Block: z.Block, Page: fs.l.P2LPage()},
				Data: make([]byte, g.PageSize), OOB: make([]byte, g.OOBSize)}})
			continue
		}
		// Open (or read-only before it filled): owners are in memory.
		known := true
		for i := di; i < z.WP; i += w {
			if z.OwnersKnown == nil || !z.OwnersKnown[i] {
				known = false
				break
			}
		}
		if !known {
			po.scanZones[z.ID] = true
			continue
		}
		for i := di; i < z.WP; i += w {
			po.cands = append(po.cands, p2lCand{z.ID, i, z.Owners[i]})
		}
	}
	fs.mu.Unlock()
	var ops []*channels.Op
	for _, r := range reads {
		ops = append(ops, r.op)
	}
	fs.doParallel(ops)
	po.pagesRead = len(ops)
	for _, r := range reads {
		owners, ok := []onflash.Owner(nil), r.op.Err == nil
		if ok {
			owners, ok = onflash.DecodeP2L(r.op.Data, r.z.ID, d.Die)
		}
		if !ok {
			po.scanZones[r.z.ID] = true
			continue
		}
		for p, o := range owners {
			po.cands = append(po.cands, p2lCand{r.z.ID, p*r.w + r.di, o})
		}
	}
	return po
}

// scanWindowLocked returns the mapped file pages on die d of the files in
// window w, restricted to zones in only (nil: all): the files, sorted by ID,
// are cut into `workers` contiguous regions (reparo.Partition)
// scanned in parallel.
func (fs *FS) scanWindowLocked(d flash.DieAddr, only map[int]bool, workers int, w reparo.Window, st *IdentifyStats) map[uint64][]uint64 {
	inos := make([]*inode, 0, len(fs.byID))
	for id, ino := range fs.byID {
		if w.Contains(id) {
			inos = append(inos, ino)
		}
	}
	sort.Slice(inos, func(a, b int) bool { return inos[a].id < inos[b].id })
	bounds := reparo.Partition(len(inos), workers)
	results := make([]map[uint64][]uint64, workers)
	entries := make([]int, workers)
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			res := map[uint64][]uint64{}
			for _, ino := range inos[bounds[k]:bounds[k+1]] {
				for _, e := range ino.m.Exts {
					z := fs.zones.All[e.Zone]
					entries[k]++
					if z.Channel != d.Channel || (only != nil && !only[z.ID]) {
						continue
					}
					for i := 0; i < e.N; i++ {
						zp := e.ZonePage + i
						if z.Dies[zp%len(z.Dies)] == d.Die {
							res[ino.id] = append(res[ino.id], e.FilePage+uint64(i))
						}
					}
				}
			}
			results[k] = res
		}(k)
	}
	wg.Wait()
	out := map[uint64][]uint64{}
	for k, r := range results {
		st.Entries += entries[k]
		for id, ps := range r {
			out[id] = append(out[id], ps...)
		}
	}
	return out
}

// rangesLocked turns lost pages into merged, sorted byte ranges.
func (fs *FS) rangesLocked(pages map[uint64][]uint64) []FileRange {
	ps := int64(fs.l.Geometry.PageSize)
	var ids []uint64
	for id := range pages {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	var out []FileRange
	for _, id := range ids {
		ino := fs.byID[id]
		list := pages[id]
		sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
		for i := 0; i < len(list); {
			j := i + 1
			for j < len(list) && list[j] <= list[j-1]+1 {
				j++
			}
			off := int64(list[i]) * ps
			end := min((int64(list[j-1])+1)*ps, ino.size)
			if end > off {
				out = append(out, FileRange{Name: ino.name, FileID: id, Off: off, Len: end - off})
			}
			i = j
		}
	}
	return out
}
