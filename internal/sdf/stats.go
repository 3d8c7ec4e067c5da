package sdf

import (
	"fmt"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// Stats is a snapshot of the layer's state and counters. Capacity and zone
// counts describe the device now; the counters start at zero when the FS is
// formatted or opened.
type Stats struct {
	// Capacity.
	Raw          base.Bytes // data bytes of every block of the device
	Usable       base.Bytes // data pages of good blocks in data zones (P2L pages and metadata zones excluded)
	MetaReserved base.Bytes // the metadata zones
	BadBytes     base.Bytes // blocks that are bad or on failed dies
	Used         base.Bytes // programmed data pages in data zones (live or dead)
	Live         base.Bytes // data pages some file maps
	// GCRoom is the room host GC works in: GCFreeZonesMin zones of
	// average capacity. Writes that leave Usable-Live under it keep GC
	// busy relocating and, with writers racing GC for the pages of open
	// zones, can fill every zone (ErrNoSpace while dead pages remain).
	GCRoom base.Bytes
	// Zones by state (data zones only).
	Zones [zones.NumStates]int
	// Write amplification: flash bytes programmed per user byte appended.
	UserBytes    int64
	RewriteBytes int64
	FlashBytes   int64 // data, P2L and metadata pages programmed
	DataPages    int64
	PadBytes     int64
	TailRewrites int64
	P2LPages     int64
	MetaPages    int64
	Checkpoints  int64
	// GC work.
	GCRuns  int64
	GCPages int64
	Resets  int64
	// Per-channel device operations.
	ChannelReads, ChannelPrograms, ChannelErases, ChannelErrors []int64
	// Corruption.
	Corruptions    int64 // reads that returned a CorruptionError
	ChecksumErrors int64 // pages whose checksum or identity did not verify
	Uncorrectable  int64
	DieFailedReads int64
	ProgramErrors  int64
	FailedDies     int
	Probes         int64 // detector probes: first pages of suspect and neighbouring blocks read
	Rebalanced     int64 // bytes Rebalance moved off channels above their share (Reparo's fake failures)
	ReadBytes      int64
	RecoveryReads  int64 // pages read on open to recover synced pages of unsealed zones
	RecoveredPages int64 // pages that recovery mapped
	Rereads        int64 // pages read again after a checksum failure
	Transients     int64 // re-reads that verified (a transient flip)
	ReadAheads     int64 // ReadAt calls served from a read-ahead (Options.ReadAheadBytes)
	Files          int
}

// WriteAmplification is FlashBytes / UserBytes (0 before any write).
func (s Stats) WriteAmplification() float64 {
	if s.UserBytes == 0 {
		return 0
	}
	return float64(s.FlashBytes) / float64(s.UserBytes)
}

// UsableFraction is Usable / Raw.
func (s Stats) UsableFraction() float64 {
	if s.Raw == 0 {
		return 0
	}
	return float64(s.Usable) / float64(s.Raw)
}

func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity: raw %s, usable %s (%.2f%% of raw), metadata %s, bad %s, used %s, live %s\n",
		s.Raw, s.Usable, 100*s.UsableFraction(), s.MetaReserved, s.BadBytes, s.Used, s.Live)
	fmt.Fprintf(&b, "zones:")
	for st := ZoneState(0); st < zones.NumStates; st++ {
		fmt.Fprintf(&b, " %s=%d", st, s.Zones[st])
	}
	fmt.Fprintf(&b, "\nwrites: user %d B, flash %d B, write amplification %.3f (padding %d B, tail rewrites %d, P2L pages %d, metadata pages %d, checkpoints %d)\n",
		s.UserBytes, s.FlashBytes, s.WriteAmplification(), s.PadBytes, s.TailRewrites, s.P2LPages, s.MetaPages, s.Checkpoints)
	fmt.Fprintf(&b, "gc: runs %d, pages copied %d, zone resets %d\n", s.GCRuns, s.GCPages, s.Resets)
	fmt.Fprintf(&b, "corruption: reads %d, checksum %d (re-read %d, transient %d), uncorrectable %d, failed-die reads %d, program errors %d, failed dies %d\n",
		s.Corruptions, s.ChecksumErrors, s.Rereads, s.Transients, s.Uncorrectable, s.DieFailedReads, s.ProgramErrors, s.FailedDies)
	return b.String()
}

// Stats returns a snapshot.
func (fs *FS) Stats() Stats {
	g := fs.l.Geometry
	ps := base.Bytes(g.PageSize)
	blockBytes := g.BlockSize()
	var s Stats
	s.Raw = g.RawCapacity()
	fs.mu.Lock()
	for _, z := range fs.zones.All {
		if z.Meta {
			s.MetaReserved += blockBytes * base.Bytes(g.DiesPerChannel)
			continue
		}
		s.Zones[z.State]++
		if z.State != ZoneOffline {
			s.Usable += base.Bytes(z.Capacity(fs.l)) * ps
		}
		s.BadBytes += base.Bytes(g.DiesPerChannel-len(z.Dies)) * blockBytes
		s.Used += base.Bytes(z.WP) * ps
		s.Live += base.Bytes(z.Live) * ps
	}
	if n := len(fs.zones.All) - onflash.MetaZoneCount - s.Zones[ZoneOffline]; n > 0 {
		s.GCRoom = s.Usable / base.Bytes(n) * base.Bytes(fs.opts.GCFreeZonesMin)
	}
	s.FailedDies = len(fs.zones.Failed)
	s.Files = len(fs.files)
	fs.mu.Unlock()
	c := &fs.ctr
	s.UserBytes = c.userBytes.Load()
	s.RewriteBytes = c.rewriteBytes.Load()
	s.DataPages = c.dataPages.Load()
	s.PadBytes = c.padBytes.Load()
	s.TailRewrites = c.tailRewrites.Load()
	s.P2LPages = c.p2lPages.Load()
	s.MetaPages = fs.jr.Stats.MetaPages.Load()
	s.Checkpoints = fs.jr.Stats.Checkpoints.Load()
	s.FlashBytes = (s.DataPages + s.P2LPages + s.MetaPages) * int64(g.PageSize)
	s.GCRuns = c.gcRuns.Load()
	s.GCPages = c.gcPages.Load()
	s.Resets = c.resets.Load()
	s.Corruptions = c.corruptions.Load()
	s.ChecksumErrors = c.checksumErrs.Load()
	s.Uncorrectable = c.uncorrectables.Load()
	s.DieFailedReads = c.dieFailedReads.Load()
	s.ProgramErrors = c.programErrs.Load()
	s.Probes = c.probes.Load()
	s.Rebalanced = c.rebalanced.Load()
	s.ReadBytes = c.readBytes.Load()
	s.Rereads = c.rereads.Load()
	s.RecoveryReads = c.recoveryReads.Load()
	s.RecoveredPages = c.recoveredPages.Load()
	s.Transients = c.transients.Load()
	s.ReadAheads = c.readAheads.Load()
	for _, ch := range fs.chans {
		s.ChannelReads = append(s.ChannelReads, ch.Stats.Reads.Load())
		s.ChannelPrograms = append(s.ChannelPrograms, ch.Stats.Programs.Load())
		s.ChannelErases = append(s.ChannelErases, ch.Stats.Erases.Load())
		s.ChannelErrors = append(s.ChannelErrors, ch.Stats.Errors.Load())
	}
	return s
}

// ZoneInfo describes one zone (for tools and tests).
type ZoneInfo struct {
	ID, Channel, Block int
	Meta               bool
	State              ZoneState
	Dies               []int
	WritePointer       int // data pages written
	Capacity           int // data pages
	Live               int // pages mapped by files
	EraseCount         int
	Hint               Lifetime
}

func (z ZoneInfo) String() string {
	return fmt.Sprintf("zone %d ch%d/b%d %s wp=%d/%d live=%d pe=%d", z.ID, z.Channel, z.Block, z.State,
		z.WritePointer, z.Capacity, z.Live, z.EraseCount)
}

// Zones describes every zone.
func (fs *FS) Zones() []ZoneInfo {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]ZoneInfo, 0, len(fs.zones.All))
	for _, z := range fs.zones.All {
		out = append(out, ZoneInfo{ID: z.ID, Channel: z.Channel, Block: z.Block, Meta: z.Meta, State: z.State,
			Dies: append([]int(nil), z.Dies...), WritePointer: z.WP, Capacity: z.Capacity(fs.l), Live: z.Live,
			EraseCount: z.Erases, Hint: Lifetime(z.Hint)})
	}
	return out
}

// Layout is the on-flash layout of the device the FS is on (its geometry
// and where zones, data pages and P2L pages lie).
func (fs *FS) Layout() onflash.Layout { return fs.l }

// DataPages lists the physical pages that hold f's data, in file order: for
// reading them straight from the device (the raw-read reference of the
// throughput benchmarks), not for serving data (nothing is verified).
func (fs *FS) DataPages(f *File) []flash.PageAddr {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []flash.PageAddr
	for _, e := range f.ino.m.Exts {
		z := fs.zones.All[e.Zone]
		for k := 0; k < e.N; k++ {
			out = append(out, fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+k))
		}
	}
	return out
}

// RangeChannels counts, for each channel, the data pages of f that hold
// bytes [off, off+n) (a page not mapped yet, buffered or past the end,
// counts nowhere): where a copy of those bytes must not go, if it is to
// outlive a die failure (a zone spans every die of its channel).
func (fs *FS) RangeChannels(f *File, off, n int64) []int {
	out := make([]int, fs.l.Geometry.Channels)
	if off < 0 || n <= 0 {
		return out
	}
	ps := int64(fs.l.Geometry.PageSize)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for pg := off / ps; pg*ps < off+n; pg++ {
		if e, ok := f.ino.m.Find(uint64(pg)); ok {
			out[fs.l.ZoneChannel(e.Zone)]++
		}
	}
	return out
}
