package dieloss

import (
	"fmt"
	"sort"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/extmap"
	"github.com/flashmend/flashmend/internal/sdf/metalog"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// Fail records in t that die d failed and returns what the journal must
// record to make it durable: the failed die, the data zones that stop
// taking writes (read-only), and the empty data zones re-formed without
// the die (their new die mask; offline when none is left). checkpoint is
// set when a checkpoint body or an active metadata zone has a copy on the
// die: the journal's next flush must write a new epoch elsewhere. A die
// already failed changes nothing (nil, false). The allocator's weights are
// set from the surviving dies under policy.
//
// A metadata zone's die set is not changed here: the active ones are
// written by the journal, and every metadata zone is reset on its good
// dies before it is used again.
func Fail(t *zones.Table, d flash.DieAddr, policy reparo.Policy) (recs []metalog.Record, checkpoint bool) {
	if t.Failed[d] {
		return nil, false
	}
	t.Failed[d] = true
	t.SetWeights(policy)
	recs = append(recs, metalog.FailedDie{Channel: d.Channel, Die: d.Die})
	for _, z := range t.All {
		if z.Channel != d.Channel || z.DieIndex(d.Die) < 0 {
			continue
		}
		if z.Body || (z.Meta && z.State == zones.Open) {
			checkpoint = true
		}
		if z.State == zones.Open {
			z.State = zones.ReadOnly
			if !z.Meta {
				recs = append(recs, metalog.ZoneState{Zone: z.ID, State: uint64(zones.ReadOnly)})
			}
		}
		if z.State == zones.Empty && !z.Meta {
			z.DropDie(d.Die)
			if len(z.Dies) == 0 {
				z.State = zones.Offline
			}
			recs = append(recs, metalog.ZoneReset{Zone: z.ID, Mask: onflash.MaskOf(z.Dies)})
		}
	}
	return recs, checkpoint
}

// File is a file as the loss computations see it.
type File struct {
	ID   uint64
	Name string
	Size int64
	Map  *extmap.Map
}

// Lookup finds a file by ID.
type Lookup func(id uint64) (File, bool)

// PagesOn appends to dst the file pages of extent e, in zone z, that z's
// stripe puts on die.
func PagesOn(dst []uint64, z *zones.Zone, e extmap.Extent, die int) []uint64 {
	for i := 0; i < e.N; i++ {
		if z.Dies[(e.ZonePage+i)%len(z.Dies)] == die {
			dst = append(dst, e.FilePage+uint64(i))
		}
	}
	return dst
}

// Scan returns the file pages of files on die d, by file ID, looking only at
// the zones in only (nil: every zone), and the number of extents it
// examined: the scan identifier (IDR, or one of CDR's workers).
func Scan(t *zones.Table, files []File, d flash.DieAddr, only map[int]bool) (pages map[uint64][]uint64, entries int) {
	pages = map[uint64][]uint64{}
	for _, f := range files {
		var mine []uint64
		for _, e := range f.Map.Exts {
			z := t.All[e.Zone]
			entries++
			if z.Channel != d.Channel || (only != nil && !only[z.ID]) {
				continue
			}
			mine = PagesOn(mine, z, e, d.Die)
		}
		if len(mine) > 0 {
			pages[f.ID] = append(pages[f.ID], mine...)
		}
	}
	return pages, entries
}

// ScanParallel is Scan split among workers (CDR; IDR is one worker): the
// files, which the caller sorts by ID, are cut into contiguous regions
// (reparo.Partition) scanned in parallel; the pages are merged by file.
func ScanParallel(t *zones.Table, files []File, d flash.DieAddr, only map[int]bool, workers int) (pages map[uint64][]uint64, entries int) {
	workers = max(workers, 1)
	bounds := reparo.Partition(len(files), workers)
	results := make([]map[uint64][]uint64, workers)
	counts := make([]int, workers)
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			results[k], counts[k] = Scan(t, files[bounds[k]:bounds[k+1]], d, only)
		}(k)
	}
	wg.Wait()
	pages = map[uint64][]uint64{}
	for k, r := range results {
		entries += counts[k]
		for id, ps := range r {
			pages[id] = append(pages[id], ps...)
		}
	}
	return pages, entries
}

// Candidate is one owner entrusted to a die's neighbour (read from a P2L
// page) or kept in a zone's owner list: data page ZonePage of Zone was
// written for Owner. It may be stale: the page may have been replaced or
// its file removed since.
type Candidate struct {
	Zone, ZonePage int
	Owner          onflash.Owner
}

// Live reports whether c's page is still its file's (the file's map f
// places the owner's page at that very data page) and lies on die.
func (c Candidate) Live(t *zones.Table, f *extmap.Map, die int) bool {
	z := t.All[c.Zone]
	p := uint64(c.Owner.Page)
	e, ok := f.Find(p)
	return ok && e.Zone == c.Zone && e.ZonePage+int(p-e.FilePage) == c.ZonePage &&
		len(z.Dies) > 0 && z.Dies[c.ZonePage%len(z.Dies)] == die
}

// Confirm returns the pages of the candidates that are live on die d, of
// the files in window w, and the number of candidates examined (CDR*'s
// query, which reads no flash).
func Confirm(t *zones.Table, cands []Candidate, lookup Lookup, d flash.DieAddr, w reparo.Window) (pages map[uint64][]uint64, entries int) {
	pages = map[uint64][]uint64{}
	for _, c := range cands {
		entries++
		if c.Owner.FileID == 0 || !w.Contains(c.Owner.FileID) {
			continue
		}
		f, ok := lookup(c.Owner.FileID)
		if ok && c.Live(t, f.Map, d.Die) {
			pages[f.ID] = append(pages[f.ID], uint64(c.Owner.Page))
		}
	}
	return pages, entries
}

// P2LRead is one P2L page to read for a die: the last page of the block of
// die Host in Zone lists the owners of the die's block, which is at
// position DieIndex of the zone's stripe of Width dies.
type P2LRead struct {
	Zone                  *zones.Zone
	Host, DieIndex, Width int
}

// Candidates turns the owners a P2L page of r lists into candidates.
func (r P2LRead) Candidates(owners []onflash.Owner) []Candidate {
	out := make([]Candidate, 0, len(owners))
	for p, o := range owners {
		out = append(out, Candidate{r.Zone.ID, p*r.Width + r.DieIndex, o})
	}
	return out
}

// PlanP2L says how CDR* learns the owners of every block of die d in a
// data zone that holds pages: from the zone's P2L page entrusted to a
// neighbouring die (reads), from the zone's owner list kept in memory when
// the zone is not full and every owner is known (cands), or by the scan
// (scan: a zone whose owners written before a reopen are not known).
func PlanP2L(t *zones.Table, d flash.DieAddr) (reads []P2LRead, cands []Candidate, scan map[int]bool) {
	scan = map[int]bool{}
	for b := 0; b < t.L.Geometry.BlocksPerDie; b++ {
		z := t.OnChannel(d.Channel, b)
		if z.Meta || z.WP == 0 || z.State == zones.Empty || z.State == zones.Offline {
			continue
		}
		di := z.DieIndex(d.Die)
		if di < 0 {
			continue
		}
		w := len(z.Dies)
		if z.P2L {
			host, _ := z.EntrustedTo(d.Die)
			reads = append(reads, P2LRead{Zone: z, Host: host, DieIndex: di, Width: w})
			continue
		}
		known := true
		for i := di; i < z.WP; i += w {
			if z.OwnersKnown == nil || !z.OwnersKnown[i] {
				known = false
				break
			}
		}
		if !known {
			scan[z.ID] = true
			continue
		}
		for i := di; i < z.WP; i += w {
			cands = append(cands, Candidate{z.ID, i, z.Owners[i]})
		}
	}
	return reads, cands, scan
}

// PagesWritten counts the programmed data pages of die d's blocks in data
// zones: what a page-level P2L entrustment (Reparo 6.1) would read, one
// spare area per page, against one page per block for the block-level
// scheme.
func PagesWritten(t *zones.Table, d flash.DieAddr) int {
	n := 0
	for b := 0; b < t.L.Geometry.BlocksPerDie; b++ {
		z := t.OnChannel(d.Channel, b)
		if z.Meta || z.WP == 0 {
			continue
		}
		di := z.DieIndex(d.Die)
		if di < 0 {
			continue
		}
		for i := di; i < z.WP; i += len(z.Dies) {
			n++
		}
	}
	return n
}

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

// Ranges turns file pages (by file ID) into byte ranges, sorted by file ID
// and offset, adjacent pages merged, cut at each file's size.
func Ranges(pages map[uint64][]uint64, lookup Lookup, pageSize int64) []FileRange {
	var ids []uint64
	for id := range pages {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	var out []FileRange
	for _, id := range ids {
		f, ok := lookup(id)
		if !ok {
			continue
		}
		list := pages[id]
		sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
		for i := 0; i < len(list); {
			j := i + 1
			for j < len(list) && list[j] <= list[j-1]+1 {
				j++
			}
			off := int64(list[i]) * pageSize
			end := min((int64(list[j-1])+1)*pageSize, f.Size)
			if end > off {
				out = append(out, FileRange{Name: f.Name, FileID: id, Off: off, Len: end - off})
			}
			i = j
		}
	}
	return out
}

// ChannelUsage is one channel's live data against its surviving capacity.
type ChannelUsage struct {
	Channel       int
	LiveDies      int
	LivePages     int64 // data pages some file maps (pages on a failed die count until they are repaired)
	CapacityPages int64 // data pages of the channel's zones on surviving dies
	Utilization   float64
}

// Usage reports every data channel's usage.
func Usage(t *zones.Table) []ChannelUsage {
	out := make([]ChannelUsage, t.L.Geometry.Channels)
	live := t.LiveDies()
	for c := range out {
		out[c] = ChannelUsage{Channel: c, LiveDies: live[c]}
	}
	per := int64(t.L.DataPagesPerBlock())
	for _, z := range t.Data() {
		u := &out[z.Channel]
		u.CapacityPages += per * int64(len(t.GoodDies(z)))
		u.LivePages += int64(z.Live)
	}
	for c := range out {
		if out[c].CapacityPages > 0 {
			out[c].Utilization = float64(out[c].LivePages) / float64(out[c].CapacityPages)
		}
	}
	return out
}

// excess is, per channel, the live pages above its share under policy.
func excess(t *zones.Table, policy reparo.Policy) []int64 {
	usage := Usage(t)
	live := make([]int64, len(usage))
	dies := make([]int, len(usage))
	for c, u := range usage {
		live[c], dies[c] = u.LivePages, u.LiveDies
	}
	return reparo.Excess(reparo.Shares(policy, dies), live)
}

// FakeFailures returns the live file pages a rebalance moves off the
// channels holding more than their share under policy (none under IDR,
// which leaves the loss on the victim, or before any die failed), and the
// channels they are on (over): on each such channel the emptiest zones
// first (moving their pages frees whole zones) until they hold the excess,
// their pages on surviving dies (those on failed dies are real failures).
func FakeFailures(t *zones.Table, files []File, policy reparo.Policy) (pages map[uint64][]uint64, over []bool) {
	if policy == reparo.HandlerIDR || len(t.Failed) == 0 {
		return nil, nil
	}
	ex := excess(t, policy)
	over = make([]bool, len(ex))
	pages = map[uint64][]uint64{}
	for c, n := range ex {
		if n <= 0 {
			continue
		}
		over[c] = true
		var zs []*zones.Zone
		for b := 0; b < t.L.Geometry.BlocksPerDie; b++ {
			if z := t.OnChannel(c, b); !z.Meta && z.Live > 0 {
				zs = append(zs, z)
			}
		}
		sort.Slice(zs, func(a, b int) bool {
			return zs[a].Live < zs[b].Live || (zs[a].Live == zs[b].Live && zs[a].ID < zs[b].ID)
		})
		want := map[int]bool{}
		for _, z := range zs {
			if n <= 0 {
				break
			}
			want[z.ID] = true
			n -= int64(z.Live)
		}
		for _, f := range files {
			for _, e := range f.Map.Exts {
				if !want[e.Zone] {
					continue
				}
				z := t.All[e.Zone]
				for i := 0; i < e.N; i++ {
					if !t.Failed[flash.DieAddr{Channel: z.Channel, Die: z.Dies[(e.ZonePage+i)%len(z.Dies)]}] {
						pages[f.ID] = append(pages[f.ID], e.FilePage+uint64(i))
					}
				}
			}
		}
	}
	return pages, over
}

// Health says whether the device can still absorb its failed dies (Reparo
// section 7.2.3: successive die failures are repaired in place until the
// spare capacity runs out).
type Health struct {
	FailedDies int
	// Surviving is the data capacity of the dies still alive; Live the data
	// files map; GCRoom the room host GC needs to work.
	Surviving, Live, GCRoom base.Bytes
	// Spare is Surviving - Live - GCRoom (negative: the live data no longer
	// fits): what further die failures can take.
	Spare base.Bytes
	// Degraded is set, with the reason, when the device cannot keep its
	// data and its performance: a channel lost every die, or the live data
	// no longer fits in the surviving dies beside GC's room.
	Degraded bool
	Reason   string
}

// Check reports the device's health after its die failures, GC keeping
// gcFreeZones zones of average capacity for its work.
func Check(t *zones.Table, gcFreeZones int) Health {
	g := t.L.Geometry
	ps := base.Bytes(g.PageSize)
	h := Health{FailedDies: len(t.Failed)}
	n := 0
	for _, z := range t.All {
		if z.Meta || z.State == zones.Offline {
			continue
		}
		n++
		alive := 0
		for _, d := range z.Dies {
			if !t.Failed[flash.DieAddr{Channel: z.Channel, Die: d}] {
				alive++
			}
		}
		h.Surviving += base.Bytes(alive*t.L.DataPagesPerBlock()) * ps
		h.Live += base.Bytes(z.Live) * ps
	}
	if n > 0 {
		h.GCRoom = h.Surviving / base.Bytes(n) * base.Bytes(gcFreeZones)
	}
	var lostChannels []int
	for c, live := range t.LiveDies() {
		if live == 0 {
			lostChannels = append(lostChannels, c)
		}
	}
	h.Spare = h.Surviving - h.Live - h.GCRoom
	switch {
	case len(lostChannels) > 0:
		h.Degraded = true
		h.Reason = fmt.Sprintf("channels %v lost every die: their bandwidth is gone and copies kept on distinct channels have fewer channels to use", lostChannels)
	case h.Spare < 0:
		h.Degraded = true
		h.Reason = fmt.Sprintf("no spare capacity left: %d failed dies leave %s, the live data (%s) and GC's room (%s) need %s; data on a further failed die cannot be repaired in place",
			h.FailedDies, h.Surviving, h.Live, h.GCRoom, h.Live+h.GCRoom)
	}
	return h
}
