package sim

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// DeviceConfig is one server's flash device. The defaults are paper 004
// Table II: 4 KB pages, 256 KB blocks, 25 us read, 200 us program, 1.5 ms
// erase, 15% over-provisioning, and a page-mapped FTL with greedy garbage
// collection.
type DeviceConfig struct {
	PageBytes     int
	PagesPerBlock int
	// LogicalBytes is what the host may keep live on the device.
	LogicalBytes int64
	// OverProvision is the fraction of the physical pages the FTL keeps
	// out of the logical capacity (default 0.15). Ignored when HostManaged.
	OverProvision float64
	ReadLatency   time.Duration
	WriteLatency  time.Duration
	EraseLatency  time.Duration
	// HostManaged models SDF (paper 002) as our internal/sdf layer runs it:
	// the host appends to zones of ZoneBlocks blocks (write unit = erase
	// unit), resets whole zones, keeps no over-provisioning beyond
	// GCFreeZonesMin empty zones and its two open zones, and collects
	// garbage greedily.
	HostManaged bool
	// ZoneBlocks is the blocks per zone when HostManaged (default 16).
	ZoneBlocks int
	// GCFreeZonesMin is the empty erase units below which garbage
	// collection runs (default 2 for the FTL; 4 when HostManaged, the
	// internal/sdf default).
	GCFreeZonesMin int
	// Channels is the device's intra-device parallelism (default 1: one
	// queue, as the paper's FlashSim setup of Table II is modelled). With
	// more, a request's page operations are dealt round-robin over the
	// channels, each of which serves its operations in order, and the
	// request completes when its last operation does. NB: timing only;
	// where pages land, and so garbage collection, erases and write
	// amplification, do not depend on it. A GC copy (a read and a program)
	// and an erase are dealt like pages, not kept on the channel of the
	// block they touch: a simplification that shortens GC stalls by the
	// channel count at most.
	Channels int
}

// Table II and internal/sdf defaults.
const (
	DefaultPageBytes      = 4096
	DefaultPagesPerBlock  = 64
	DefaultOverProvision  = 0.15
	DefaultReadLatency    = 25 * time.Microsecond
	DefaultWriteLatency   = 200 * time.Microsecond
	DefaultEraseLatency   = 1500 * time.Microsecond
	DefaultZoneBlocks     = 16
	defaultFTLFreeMin     = 2
	defaultSDFFreeZoneMin = 4
	// MaxPartPages bounds a part (a copy or a shard): page sets are 64-bit
	// masks.
	MaxPartPages = 64
)

func (c DeviceConfig) withDefaults() (DeviceConfig, error) {
	base.SetDefault(&c.PageBytes, DefaultPageBytes)
	base.SetDefault(&c.PagesPerBlock, DefaultPagesPerBlock)
	if c.OverProvision == 0 && !c.HostManaged {
		c.OverProvision = DefaultOverProvision
	}
	base.SetDefault(&c.ReadLatency, DefaultReadLatency)
	base.SetDefault(&c.WriteLatency, DefaultWriteLatency)
	base.SetDefault(&c.EraseLatency, DefaultEraseLatency)
	base.SetDefault(&c.ZoneBlocks, DefaultZoneBlocks)
	base.SetDefault(&c.Channels, 1)
	if c.GCFreeZonesMin == 0 {
		c.GCFreeZonesMin = defaultFTLFreeMin
		if c.HostManaged {
			c.GCFreeZonesMin = defaultSDFFreeZoneMin
		}
	}
	switch {
	case c.PageBytes < 512 || c.PageBytes > 1<<20:
		return c, base.InvalidArgumentf("sim: page of %d bytes", c.PageBytes)
	case c.PagesPerBlock < 2 || c.PagesPerBlock > 4096:
		return c, base.InvalidArgumentf("sim: %d pages per block", c.PagesPerBlock)
	case c.LogicalBytes < int64(c.PageBytes):
		return c, base.InvalidArgumentf("sim: logical capacity of %d bytes", c.LogicalBytes)
	case !(c.OverProvision >= 0 && c.OverProvision < 0.9):
		return c, base.InvalidArgumentf("sim: over-provisioning %g outside [0, 0.9)", c.OverProvision)
	case c.ZoneBlocks < 1 || c.ZoneBlocks > 1024:
		return c, base.InvalidArgumentf("sim: %d blocks per zone", c.ZoneBlocks)
	case c.GCFreeZonesMin < 2 || c.GCFreeZonesMin > 1024:
		return c, base.InvalidArgumentf("sim: GC free-unit minimum %d outside [2, 1024]", c.GCFreeZonesMin)
	case c.Channels < 1 || c.Channels > 256:
		return c, base.InvalidArgumentf("sim: %d channels outside [1, 256]", c.Channels)
	case c.ReadLatency < 0 || c.WriteLatency < 0 || c.EraseLatency < 0:
		return c, base.InvalidArgumentf("sim: negative latency")
	}
	return c, nil
}

// ErrDeviceFull is returned by a write that would keep more live pages
// than the device's logical capacity.
var ErrDeviceFull = errors.New("sim: device full")

const (
	euFree uint8 = iota
	euOpen
	euFull
)

// frontier is an open erase unit and its write pointer.
type frontier struct {
	eu int32
	wp int32
}

// Device is a page-mapped flash device with greedy garbage collection (or
// SDF's host-managed zones): every page program, copy and erase is
// counted, and each request's service time follows Table II's timing on
// one queue per device (virtual time in nanoseconds).
//
// Invariants (checkConsistency): every written page of a part maps to a
// physical page whose reverse map names that part and page; an erase
// unit's valid count is the number of such pages in it; full units sit in
// the bucket of their valid count.
type Device struct {
	cfg         DeviceConfig
	pagesPerEU  int32
	blocksPerEU int64
	eus         int32
	logical     int64 // pages

	p2lPart []int32 // physical page -> part (-1: free or invalid)
	p2lIdx  []uint16
	valid   []int32 // per erase unit
	state   []uint8
	erased  []int32 // erase count per unit
	// Full units in doubly linked lists by valid count (greedy victim is the
	// lowest non-empty bucket).
	next, prev []int32
	head       []int32
	free       []int32
	user, gc   frontier

	parts     [][]int32 // part -> physical page per part page (-1 unwritten)
	freeParts []int32
	live      int64 // valid pages

	// Counters since the device was made (Snapshot subtracts a baseline).
	hostPages, gcPages, erases int64 // erases in blocks
	victims, victimValid       int64
	// busyUntil is when each channel has served what it was given (ns);
	// cursor is the channel the next operation goes to.
	busyUntil []int64
	cursor    int
}

// NewDevice makes an empty device.
func NewDevice(cfg DeviceConfig) (*Device, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Device{cfg: c, blocksPerEU: 1, pagesPerEU: int32(c.PagesPerBlock), busyUntil: make([]int64, c.Channels)}
	if c.HostManaged {
		d.blocksPerEU = int64(c.ZoneBlocks)
		d.pagesPerEU = int32(c.PagesPerBlock * c.ZoneBlocks)
	}
	d.logical = c.LogicalBytes / int64(c.PageBytes)
	physPages := d.logical
	if !c.HostManaged {
		physPages = int64(float64(d.logical)/(1-c.OverProvision) + 0.5)
	}
	// Whole erase units, plus the GC reserve and the two open units.
	eus := (physPages+int64(d.pagesPerEU)-1)/int64(d.pagesPerEU) + int64(c.GCFreeZonesMin) + 2
	if eus*int64(d.pagesPerEU) > 1<<31-1 {
		return nil, base.InvalidArgumentf("sim: device of %d pages is too large", eus*int64(d.pagesPerEU))
	}
	d.eus = int32(eus)
	n := int(eus) * int(d.pagesPerEU)
	d.p2lPart = make([]int32, n)
	for i := range d.p2lPart {
		d.p2lPart[i] = -1
	}
	d.p2lIdx = make([]uint16, n)
	d.valid = make([]int32, eus)
	d.state = make([]uint8, eus)
	d.erased = make([]int32, eus)
	d.next = make([]int32, eus)
	d.prev = make([]int32, eus)
	d.head = make([]int32, d.pagesPerEU+1)
	for i := range d.head {
		d.head[i] = -1
	}
	for eu := d.eus - 1; eu >= 0; eu-- {
		d.free = append(d.free, eu)
	}
	d.user = d.open()
	d.gc = d.open()
	return d, nil
}

// Config is the device's configuration with defaults filled in.
func (d *Device) Config() DeviceConfig { return d.cfg }

// PhysicalPages is the device's raw page count.
func (d *Device) PhysicalPages() int64 { return int64(d.eus) * int64(d.pagesPerEU) }

// LogicalPages is the device's logical capacity in pages.
func (d *Device) LogicalPages() int64 { return d.logical }

// LivePages is the number of valid pages.
func (d *Device) LivePages() int64 { return d.live }

func (d *Device) open() frontier {
	eu := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	d.state[eu] = euOpen
	return frontier{eu: eu}
}

func (d *Device) bucketInsert(eu int32) {
	v := d.valid[eu]
	d.prev[eu] = -1
	d.next[eu] = d.head[v]
	if d.head[v] >= 0 {
		d.prev[d.head[v]] = eu
	}
	d.head[v] = eu
}

func (d *Device) bucketRemove(eu int32) {
	v := d.valid[eu]
	if d.prev[eu] >= 0 {
		d.next[d.prev[eu]] = d.next[eu]
	} else {
		d.head[v] = d.next[eu]
	}
	if d.next[eu] >= 0 {
		d.prev[d.next[eu]] = d.prev[eu]
	}
}

// invalidate marks a physical page dead.
func (d *Device) invalidate(phys int32) {
	eu := phys / d.pagesPerEU
	if d.state[eu] == euFull {
		d.bucketRemove(eu)
		d.valid[eu]--
		d.bucketInsert(eu)
	} else {
		d.valid[eu]--
	}
	d.p2lPart[phys] = -1
}

// program puts one page of part at the frontier f and returns where. It
// closes a full frontier and opens the next unit (after garbage collection
// when f is the user frontier and free units run low); work counts the GC
// copies and erases it caused.
func (d *Device) program(f *frontier, part int32, idx int, work *gcWork) (int32, error) {
	if f.wp == d.pagesPerEU {
		d.state[f.eu] = euFull
		d.bucketInsert(f.eu)
		if f == &d.user {
			if err := d.collect(work); err != nil {
				return 0, err
			}
		}
		if len(d.free) == 0 {
			return 0, fmt.Errorf("%w: no empty erase unit left for garbage collection", ErrDeviceFull)
		}
		*f = d.open()
	}
	phys := f.eu*d.pagesPerEU + f.wp
	f.wp++
	d.p2lPart[phys] = part
	d.p2lIdx[phys] = uint16(idx)
	d.valid[f.eu]++
	return phys, nil
}

type gcWork struct{ copies, erases int64 }

// collect runs greedy garbage collection until more than GCFreeZonesMin
// units are empty: the full unit with the fewest valid pages is the
// victim, its valid pages are copied to the GC frontier, and it is erased.
func (d *Device) collect(work *gcWork) error {
	for len(d.free) <= d.cfg.GCFreeZonesMin {
		victim := int32(-1)
		for v := int32(0); v < d.pagesPerEU; v++ {
			if d.head[v] >= 0 {
				victim = d.head[v]
				break
			}
		}
		if victim < 0 {
			return fmt.Errorf("%w: every full erase unit is entirely valid", ErrDeviceFull)
		}
		d.bucketRemove(victim)
		d.victims++
		d.victimValid += int64(d.valid[victim])
		base := victim * d.pagesPerEU
		for p := base; p < base+d.pagesPerEU && d.valid[victim] > 0; p++ {
			part := d.p2lPart[p]
			if part < 0 {
				continue
			}
			idx := int(d.p2lIdx[p])
			d.valid[victim]--
			d.p2lPart[p] = -1
			phys, err := d.program(&d.gc, part, idx, work)
			if err != nil {
				return err
			}
			d.parts[part][idx] = phys
			d.gcPages++
			work.copies++
		}
		d.valid[victim] = 0
		d.state[victim] = euFree
		d.erased[victim]++
		d.erases += d.blocksPerEU
		work.erases++
		d.free = append(d.free, victim)
	}
	return nil
}

// Precondition puts the device in the state of one that has been in
// service: every empty erase unit beyond the garbage-collection reserve
// (GCFreeZonesMin) is turned into a full unit of invalid pages, as if the
// host had written the space and trimmed it, which is what the free space
// of a device that has been written through looks like. Nothing is
// counted (no host page, copy or erase): preconditioning happens before a
// measurement's baseline. After it, every page the host or garbage
// collection programs costs an erase sooner or later (greedy GC takes the
// units of invalid pages first, at no copy), so the erases a trace causes
// are its programmed pages over the pages per block, paper 004 eq. 2's
// E_t = W_t / (B_p (1 - mu)), "after GC starts" (section III-B1; its
// write amplification is also measured "after GC starts", section
// IV-C4). NB: a device that is not preconditioned erases nothing until
// its free units run out, so a trace that writes less than the free space
// erases nothing at all, and erase counts measure how far past its free
// space each server wrote, not its wear rate.
func (d *Device) Precondition() {
	for len(d.free) > d.cfg.GCFreeZonesMin+1 {
		eu := d.free[0]
		d.free = d.free[1:]
		d.valid[eu] = 0
		d.state[eu] = euFull
		d.bucketInsert(eu)
	}
}

// NewPart makes an empty part (a copy or a shard) of pages pages.
func (d *Device) NewPart(pages int) (int32, error) {
	if pages < 1 || pages > MaxPartPages {
		return 0, base.InvalidArgumentf("sim: part of %d pages (want 1..%d)", pages, MaxPartPages)
	}
	var id int32
	if n := len(d.freeParts); n > 0 {
		id = d.freeParts[n-1]
		d.freeParts = d.freeParts[:n-1]
	} else {
		id = int32(len(d.parts))
		d.parts = append(d.parts, nil)
	}
	p := d.parts[id][:0]
	for i := 0; i < pages; i++ {
		p = append(p, -1)
	}
	d.parts[id] = p
	return id, nil
}

// FreePart trims every page of a part and forgets it.
func (d *Device) FreePart(part int32) {
	for i, phys := range d.parts[part] {
		if phys >= 0 {
			d.invalidate(phys)
			d.live--
			d.parts[part][i] = -1
		}
	}
	d.freeParts = append(d.freeParts, part)
}

// Written is the set of a part's pages that hold data.
func (d *Device) Written(part int32) uint64 {
	var m uint64
	for i, phys := range d.parts[part] {
		if phys >= 0 {
			m |= 1 << uint(i)
		}
	}
	return m
}

// Write programs the pages of part in mask (out of place) at virtual time
// now and returns the request's latency: queueing behind the device's
// earlier requests plus its service time (programs, and the copies and
// erases of the garbage collection it triggered).
func (d *Device) Write(part int32, mask uint64, now int64) (int64, error) {
	p := d.parts[part]
	if mask>>uint(len(p)) != 0 {
		return 0, base.AssertionFailedf("sim: write of pages %#x of a %d-page part", mask, len(p))
	}
	fresh := int64(0)
	for m := mask; m != 0; m &= m - 1 {
		if p[bits.TrailingZeros64(m)] < 0 {
			fresh++
		}
	}
	if d.live+fresh > d.logical {
		return 0, fmt.Errorf("%w: %d live pages + %d > %d logical", ErrDeviceFull, d.live, fresh, d.logical)
	}
	var work gcWork
	pages := int64(0)
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if old := d.parts[part][i]; old >= 0 {
			d.invalidate(old)
		} else {
			d.live++
		}
		phys, err := d.program(&d.user, part, i, &work)
		if err != nil {
			return 0, err
		}
		d.parts[part][i] = phys
		pages++
	}
	d.hostPages += pages
	done := d.serve(now, pages, int64(d.cfg.WriteLatency), now)
	done = d.serve(now, work.copies, int64(d.cfg.ReadLatency+d.cfg.WriteLatency), done)
	done = d.serve(now, work.erases, int64(d.cfg.EraseLatency), done)
	return done - now, nil
}

// Read charges a read of n pages at virtual time now and returns its
// latency.
func (d *Device) Read(pages int, now int64) int64 {
	return d.serve(now, int64(pages), int64(d.cfg.ReadLatency), now) - now
}

// serve deals n operations of service ns each, arriving at now, over the
// channels round-robin and returns when the last of them completes, or
// done if that is later. With one channel it is one queue: the operations
// start when the device is free and run back to back.
func (d *Device) serve(now, n, service, done int64) int64 {
	c := int64(len(d.busyUntil))
	if c == 1 {
		// NB: even no operation waits for the queue, as requests always
		// did before there were channels.
		d.busyUntil[0] = max(now, d.busyUntil[0]) + max(n, 0)*service
		return max(done, d.busyUntil[0])
	}
	if n <= 0 {
		return done
	}
	// Operation i goes to channel (cursor+i) mod c: each channel takes
	// n/c operations, the first n mod c one more.
	for i := int64(0); i < min(n, c); i++ {
		k := (int64(d.cursor) + i) % c
		ops := n / c
		if i < n%c {
			ops++
		}
		d.busyUntil[k] = max(now, d.busyUntil[k]) + ops*service
		done = max(done, d.busyUntil[k])
	}
	d.cursor = int((int64(d.cursor) + n) % c)
	return done
}

// Counters are a device's activity.
type Counters struct {
	HostPages   int64 // pages the host wrote
	GCPages     int64 // pages garbage collection copied
	Erases      int64 // block erases
	Victims     int64 // erase units collected
	VictimValid int64 // valid pages found in them
}

// Counters returns the device's counters since it was made.
func (d *Device) Counters() Counters {
	return Counters{HostPages: d.hostPages, GCPages: d.gcPages, Erases: d.erases, Victims: d.victims, VictimValid: d.victimValid}
}

// Sub is c minus an earlier snapshot.
func (c Counters) Sub(o Counters) Counters {
	return Counters{
		HostPages: c.HostPages - o.HostPages, GCPages: c.GCPages - o.GCPages, Erases: c.Erases - o.Erases,
		Victims: c.Victims - o.Victims, VictimValid: c.VictimValid - o.VictimValid,
	}
}

// VictimUtilization is mu: the mean valid fraction of the collected units.
func (c Counters) VictimUtilization(pagesPerEU int64) float64 {
	if c.Victims == 0 {
		return 0
	}
	return float64(c.VictimValid) / float64(c.Victims*pagesPerEU)
}

// PagesPerEraseUnit is a block (FTL) or a zone (host-managed).
func (d *Device) PagesPerEraseUnit() int64 { return int64(d.pagesPerEU) }

// checkConsistency verifies the device's invariants (tests).
func (d *Device) checkConsistency() error {
	valid := make([]int32, d.eus)
	live := int64(0)
	for part, pages := range d.parts {
		for idx, phys := range pages {
			if phys < 0 {
				continue
			}
			live++
			if d.p2lPart[phys] != int32(part) || int(d.p2lIdx[phys]) != idx {
				return fmt.Errorf("part %d page %d at %d, reverse map says part %d page %d", part, idx, phys, d.p2lPart[phys], d.p2lIdx[phys])
			}
			valid[phys/d.pagesPerEU]++
		}
	}
	if live != d.live {
		return fmt.Errorf("live %d, counted %d", d.live, live)
	}
	for eu := int32(0); eu < d.eus; eu++ {
		if valid[eu] != d.valid[eu] {
			return fmt.Errorf("unit %d valid %d, counted %d", eu, d.valid[eu], valid[eu])
		}
	}
	inBuckets := 0
	for v := range d.head {
		for eu := d.head[v]; eu >= 0; eu = d.next[eu] {
			if d.valid[eu] != int32(v) || d.state[eu] != euFull {
				return fmt.Errorf("unit %d in bucket %d has valid %d state %d", eu, v, d.valid[eu], d.state[eu])
			}
			inBuckets++
		}
	}
	full := 0
	for _, s := range d.state {
		if s == euFull {
			full++
		}
	}
	if full != inBuckets {
		return fmt.Errorf("%d full units, %d in buckets", full, inBuckets)
	}
	return nil
}
