package sdf

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
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
	Method      string // "entrustment" or "scan"
	PagesRead   int    // flash pages read (P2L pages)
	ZonesByScan int    // zones that fell back to the file-table scan
	Entries     int    // mapping entries examined
	Elapsed     time.Duration
}

func (s IdentifyStats) String() string {
	return fmt.Sprintf("%s: pages read %d, entries %d, zones by scan %d, %v",
		s.Method, s.PagesRead, s.Entries, s.ZonesByScan, s.Elapsed)
}

func errOutOfRange(d flash.DieAddr) error {
	return base.InvalidArgumentf("sdf: die %s out of range", d)
}

// LostRanges lists the live file ranges stored on die d, using block-level
// P2L entrustment (Reparo 6.2, CDR*): for every zone with a block on d it
// reads one page, the last page of the neighbouring die's block, which lists
// the owners of d's block, and keeps the entries the file table still maps
// there. Zones not yet full use the owner list kept in memory; a zone whose
// P2L page cannot be read falls back to the scan. The result is sorted by
// file ID and offset, adjacent pages merged.
func (fs *FS) LostRanges(d flash.DieAddr) ([]FileRange, IdentifyStats, error) {
	start := time.Now()
	st := IdentifyStats{Method: "entrustment"}
	g := fs.l.g
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return nil, st, errOutOfRange(d)
	}
	type cand struct {
		zone, zonePage int
		o              owner
	}
	var cands []cand
	var scanZones []int
	type p2lRead struct {
		z  *zone
		di int // d's position in the stripe
		w  int
		op *pageOp
	}
	var reads []p2lRead
	fs.mu.Lock()
	for b := 0; b < g.BlocksPerDie; b++ {
		z := fs.zones[b*g.Channels+d.Channel]
		if z.meta || z.wp == 0 || z.state == ZoneEmpty || z.state == ZoneOffline {
			continue
		}
		di := z.dieIndex(d.Die)
		if di < 0 {
			continue
		}
		w := len(z.dies)
		if z.p2l {
			host, _ := z.entrustedTo(d.Die)
			reads = append(reads, p2lRead{z: z, di: di, w: w, op: &pageOp{kind: opRead,
				addr: flash.PageAddr{Channel: z.channel, Die: host, Block: z.block, Page: fs.l.p2lPage()},
				data: make([]byte, g.PageSize), oob: make([]byte, g.OOBSize)}})
			continue
		}
		// Open (or read-only before it filled): owners are in memory.
		for i := di; i < z.wp; i += w {
			if z.ownersKnown == nil || !z.ownersKnown[i] {
				scanZones = append(scanZones, z.id)
				break
			}
		}
		if len(scanZones) > 0 && scanZones[len(scanZones)-1] == z.id {
			continue
		}
		for i := di; i < z.wp; i += w {
			cands = append(cands, cand{z.id, i, z.owners[i]})
		}
	}
	fs.mu.Unlock()
	var ops []*pageOp
	for _, r := range reads {
		ops = append(ops, r.op)
	}
	fs.doParallel(ops)
	st.PagesRead = len(ops)
	for _, r := range reads {
		owners, ok := []owner(nil), r.op.err == nil
		if ok {
			owners, ok = decodeP2L(r.op.data, r.z.id, d.Die)
		}
		if !ok {
			scanZones = append(scanZones, r.z.id)
			continue
		}
		for p, o := range owners {
			cands = append(cands, cand{r.z.id, p*r.w + r.di, o})
		}
	}
	fs.mu.Lock()
	pages := map[uint64][]uint64{} // file ID -> lost file pages
	for _, c := range cands {
		st.Entries++
		if c.o.fileID == 0 {
			continue
		}
		ino := fs.byID[c.o.fileID]
		if ino == nil {
			continue
		}
		e, ok := ino.m.find(uint64(c.o.page))
		if ok && e.zone == c.zone && e.zonePage+int(uint64(c.o.page)-e.filePage) == c.zonePage {
			pages[ino.id] = append(pages[ino.id], uint64(c.o.page))
		}
	}
	st.ZonesByScan = len(scanZones)
	if len(scanZones) > 0 {
		only := map[int]bool{}
		for _, z := range scanZones {
			only[z] = true
		}
		for id, ps := range fs.scanLocked(d, only, 1, &st) {
			pages[id] = append(pages[id], ps...)
		}
	}
	out := fs.rangesLocked(pages)
	fs.mu.Unlock()
	st.Elapsed = time.Since(start)
	return out, st, nil
}

// LostRangesScan lists the live file ranges on die d by scanning the whole
// file table in parallel (Reparo's CDR Identifier: the mapping entries are
// split among ScanWorkers workers). It is the reference for LostRanges.
func (fs *FS) LostRangesScan(d flash.DieAddr) ([]FileRange, IdentifyStats, error) {
	start := time.Now()
	st := IdentifyStats{Method: "scan"}
	g := fs.l.g
	if d.Channel < 0 || d.Channel >= g.Channels || d.Die < 0 || d.Die >= g.DiesPerChannel {
		return nil, st, errOutOfRange(d)
	}
	fs.mu.Lock()
	pages := fs.scanLocked(d, nil, fs.opts.ScanWorkers, &st)
	out := fs.rangesLocked(pages)
	fs.mu.Unlock()
	st.Elapsed = time.Since(start)
	return out, st, nil
}

// scanLocked returns the mapped file pages on die d, restricted to zones in
// only (nil: all), using `workers` goroutines over a partition of the files.
func (fs *FS) scanLocked(d flash.DieAddr, only map[int]bool, workers int, st *IdentifyStats) map[uint64][]uint64 {
	inos := make([]*inode, 0, len(fs.byID))
	for _, ino := range fs.byID {
		inos = append(inos, ino)
	}
	results := make([]map[uint64][]uint64, workers)
	entries := make([]int, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			res := map[uint64][]uint64{}
			for i := w; i < len(inos); i += workers {
				ino := inos[i]
				for _, e := range ino.m.exts {
					z := fs.zones[e.zone]
					entries[w]++
					if z.channel != d.Channel || (only != nil && !only[z.id]) {
						continue
					}
					for k := 0; k < e.n; k++ {
						zp := e.zonePage + k
						if z.dies[zp%len(z.dies)] == d.Die {
							res[ino.id] = append(res[ino.id], e.filePage+uint64(k))
						}
					}
				}
			}
			results[w] = res
		}(w)
	}
	wg.Wait()
	out := map[uint64][]uint64{}
	for w, r := range results {
		st.Entries += entries[w]
		for id, ps := range r {
			out[id] = append(out[id], ps...)
		}
	}
	return out
}

// rangesLocked turns lost pages into merged, sorted byte ranges.
func (fs *FS) rangesLocked(pages map[uint64][]uint64) []FileRange {
	ps := int64(fs.l.g.PageSize)
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
