package sdf

import (
	"github.com/flashmend/flashmend/internal/sdf/dieloss"
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

// ChannelUsage is one channel's live data against its surviving capacity
// (dieloss.ChannelUsage).
type ChannelUsage = dieloss.ChannelUsage

// ChannelUsage reports every data channel's usage.
func (fs *FS) ChannelUsage() []ChannelUsage {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return dieloss.Usage(fs.zones)
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
	pages, over := dieloss.FakeFailures(fs.zones, fs.lossFilesLocked(), fs.opts.Handler)
	if pages == nil {
		return nil, nil
	}
	return dieloss.Ranges(pages, fs.lossFileLocked, int64(fs.l.Geometry.PageSize)), over
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

// Health says whether the device can still absorb its failed dies
// (dieloss.Health).
type Health = dieloss.Health

// Health reports the device's health after its die failures.
func (fs *FS) Health() Health {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return dieloss.Check(fs.zones, fs.opts.GCFreeZonesMin)
}
