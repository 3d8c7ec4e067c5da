package sdf

import (
	"fmt"
	"sort"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// Reparo's Handler (sections 4.2.3 and 5.2) on the host-managed layer.
//
// Zones are re-formed without a failed die when they are next reset (a zone's
// die set changes only on reset), so a channel with f failed dies has zones
// (x-f)/x as wide. Where the loss is absorbed is the choice of channel for
// each new zone (reparo.Allocator, weights from reparo.Shares and
// reparo.ZoneWeights):
//
//   - CDR (default): every channel's share of the data follows its surviving
//     dies, which for our zones is one zone per channel in turn (a narrower
//     zone holds proportionally less): utilizations stay equal. Data the
//     victim channel holds above its new share is what the paper reports as
//     fake failures (section 5.2.3); FakeFailures lists it and Rebalance
//     moves it, here by a verified local read and a rewrite elsewhere (the
//     host owns the flash, so it need not fetch remote copies as the
//     paper's device must).
//   - IDR: every channel keeps an equal share of the bytes, so the victim
//     takes more, narrower zones and its utilization rises by 1/(x-1)
//     (Table 1).
//
// With no failed die the allocator is not used: zones are handed out in
// plain round-robin, SDF's placement.

// ChannelUsage is one channel's live data against its surviving capacity.
type ChannelUsage struct {
	Channel       int
	LiveDies      int
	LivePages     int64 // data pages some file maps (pages on a failed die count until they are repaired)
	CapacityPages int64 // data pages of the channel's zones on surviving dies
	Utilization   float64
}

// ChannelUsage reports every data channel's usage.
func (fs *FS) ChannelUsage() []ChannelUsage {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.channelUsageLocked()
}

func (fs *FS) channelUsageLocked() []ChannelUsage {
	g := fs.l.Geometry
	out := make([]ChannelUsage, g.Channels)
	live := fs.zones.LiveDies()
	for c := range out {
		out[c] = ChannelUsage{Channel: c, LiveDies: live[c]}
	}
	per := int64(fs.l.DataPagesPerBlock())
	for _, z := range fs.zones.Data() {
		u := &out[z.Channel]
		u.CapacityPages += per * int64(len(fs.zones.GoodDies(z)))
		u.LivePages += int64(z.Live)
	}
	for c := range out {
		if out[c].CapacityPages > 0 {
			out[c].Utilization = float64(out[c].LivePages) / float64(out[c].CapacityPages)
		}
	}
	return out
}

// excessPagesLocked is, per channel, the live pages above its share.
func (fs *FS) excessPagesLocked() []int64 {
	usage := fs.channelUsageLocked()
	live := make([]int64, len(usage))
	dies := make([]int, len(usage))
	for c, u := range usage {
		live[c], dies[c] = u.LivePages, u.LiveDies
	}
	return reparo.Excess(reparo.Shares(fs.opts.Handler, dies), live)
}

// FakeFailures lists the live file ranges Rebalance would move off the
// channels holding more than their share (none under IDR, which leaves the
// loss on the victim): what a Reparo device reports to its host as fake
// failures (section 5.2.3). Ranges on failed dies are not listed (they are
// real failures, LostRanges).
func (fs *FS) FakeFailures() []FileRange {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	rs, _ := fs.fakeFailuresLocked()
	return rs
}

func (fs *FS) fakeFailuresLocked() ([]FileRange, []bool) {
	if fs.opts.Handler == reparo.HandlerIDR || len(fs.zones.Failed) == 0 {
		return nil, nil
	}
	excess := fs.excessPagesLocked()
	over := make([]bool, len(excess))
	pages := map[uint64][]uint64{}
	for c, n := range excess {
		if n <= 0 {
			continue
		}
		over[c] = true
		// Emptiest zones first: moving their pages frees whole zones.
		var zs []*zones.Zone
		for b := 0; b < fs.l.Geometry.BlocksPerDie; b++ {
			z := fs.zones.OnChannel(c, b)
			if !z.Meta && z.Live > 0 {
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
		for _, ino := range fs.byID {
			for _, e := range ino.m.Exts {
				if !want[e.Zone] {
					continue
				}
				z := fs.zones.All[e.Zone]
				for i := 0; i < e.N; i++ {
					if !fs.zones.Failed[flash.DieAddr{Channel: z.Channel, Die: z.Dies[(e.ZonePage+i)%len(z.Dies)]}] {
						pages[ino.id] = append(pages[ino.id], e.FilePage+uint64(i))
					}
				}
			}
		}
	}
	return fs.rangesLocked(pages), over
}

// Rebalance moves the fake failures (FakeFailures) off the channels that
// hold more than their share, at most maxBytes (0: all), by reading each
// range (verified) and writing it again on the other channels. A range that
// does not read back is left for the repair path and reported in the error.
// It returns the bytes moved.
func (fs *FS) Rebalance(maxBytes int64) (int64, error) {
	if fs.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	fs.mu.Lock()
	rs, over := fs.fakeFailuresLocked()
	if len(rs) > 0 {
		fs.zones.Avoid = over
	}
	fs.mu.Unlock()
	defer func() {
		fs.mu.Lock()
		fs.zones.Avoid = nil
		fs.mu.Unlock()
	}()
	var moved int64
	var firstErr error
	for _, r := range rs {
		if maxBytes > 0 && moved >= maxBytes {
			break
		}
		f, err := fs.OpenFile(r.Name)
		if err != nil {
			continue // removed meanwhile
		}
		buf := make([]byte, r.Len)
		_, err = f.ReadAt(buf, r.Off)
		f.Close()
		if err == nil {
			err = fs.RewriteRange(r.Name, r.Off, buf)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		moved += r.Len
		fs.ctr.rebalanced.Add(r.Len)
	}
	return moved, firstErr
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

// Health reports the device's health after its die failures.
func (fs *FS) Health() Health {
	g := fs.l.Geometry
	ps := base.Bytes(g.PageSize)
	fs.mu.Lock()
	h := Health{FailedDies: len(fs.zones.Failed)}
	zones := 0
	for _, z := range fs.zones.All {
		if z.Meta || z.State == ZoneOffline {
			continue
		}
		zones++
		alive := 0
		for _, d := range z.Dies {
			if !fs.zones.Failed[flash.DieAddr{Channel: z.Channel, Die: d}] {
				alive++
			}
		}
		h.Surviving += base.Bytes(alive*fs.l.DataPagesPerBlock()) * ps
		h.Live += base.Bytes(z.Live) * ps
	}
	if zones > 0 {
		h.GCRoom = h.Surviving / base.Bytes(zones) * base.Bytes(fs.opts.GCFreeZonesMin)
	}
	var lostChannels []int
	for c := 0; c < g.Channels; c++ {
		dead := 0
		for d := 0; d < g.DiesPerChannel; d++ {
			if fs.zones.Failed[flash.DieAddr{Channel: c, Die: d}] {
				dead++
			}
		}
		if dead == g.DiesPerChannel {
			lostChannels = append(lostChannels, c)
		}
	}
	fs.mu.Unlock()
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
