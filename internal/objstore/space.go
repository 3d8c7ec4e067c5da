package objstore

import (
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
)

// SpaceReporter is implemented by stores that can say, cheaply and on every
// write, how many more bytes they can take. The chunk store keeps a repair
// reserve with it (ChunkStore.SetRepairReserve).
type SpaceReporter interface {
	// Space returns the device's capacity and the bytes still free for
	// new files.
	Space() (capacity, free base.Bytes, err error)
}

// Collector is implemented by stores that collect garbage on demand (SDF's
// host GC). A repair that meets a full device collects and tries once more.
type Collector interface {
	Collect() error
}

// Space implements SpaceReporter: the usable pages that neither hold live
// data nor are the room host GC works in (sdf.Stats.GCRoom); dead pages
// count as free, GC reclaims them.
func (s *SDFStore) Space() (capacity, free base.Bytes, err error) {
	st := s.fs.Stats()
	return st.Usable, max(st.Usable-st.Live-st.GCRoom, 0), nil
}

// Collect implements Collector with the SDF layer's host GC.
func (s *SDFStore) Collect() error {
	_, err := s.fs.GC()
	return err
}

// SetCapacity bounds the memory store (tests of full devices); 0 restores
// the default 1 GiB.
func (m *MemStore) SetCapacity(b base.Bytes) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = b
}

func (m *MemStore) capacityLocked() base.Bytes {
	if m.capacity == 0 {
		return base.GiB
	}
	return m.capacity
}

func (m *MemStore) usedLocked() base.Bytes {
	var used int64
	for _, b := range m.files {
		used += int64(len(b))
	}
	return base.Bytes(used)
}

// Space implements SpaceReporter.
func (m *MemStore) Space() (capacity, free base.Bytes, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.capacityLocked()
	return c, max(c-m.usedLocked(), 0), nil
}

// Space passes the inner store's report through (ok false when it has
// none).
func (f *FaultStore) Space() (capacity, free base.Bytes, err error) {
	sr, ok := f.Store.(SpaceReporter)
	if !ok {
		return 0, 0, errNoSpaceReport
	}
	return sr.Space()
}

// Collect passes through to the inner store (nothing to do without one).
func (f *FaultStore) Collect() error {
	if c, ok := f.Store.(Collector); ok {
		return c.Collect()
	}
	return nil
}

var errNoSpaceReport = fmt.Errorf("objstore: store does not report its space")

// space returns what the chunk store's device reports, ok false when it
// reports nothing (then no reserve is kept).
func (c *ChunkStore) space() (capacity, free base.Bytes, ok bool, err error) {
	sr, isReporter := c.store.(SpaceReporter)
	if !isReporter {
		return 0, 0, false, nil
	}
	capacity, free, err = sr.Space()
	if err == errNoSpaceReport {
		return 0, 0, false, nil
	}
	return capacity, free, err == nil, err
}

// SetRepairReserve keeps fraction (0 to 0.5) of the device's capacity free
// for repairs: a new chunk write that would leave less than that free is
// refused with an error wrapping base.ErrNoSpace, while repair writes may
// use the reserve. 0 keeps no reserve.
func (c *ChunkStore) SetRepairReserve(fraction float64) error {
	if !(fraction >= 0 && fraction <= 0.5) {
		return base.InvalidArgumentf("repair reserve %g outside [0, 0.5] of the device", fraction)
	}
	c.reserveMu.Lock()
	defer c.reserveMu.Unlock()
	c.reserve = fraction
	return nil
}

// RepairReserve returns the fraction set by SetRepairReserve.
func (c *ChunkStore) RepairReserve() float64 {
	c.reserveMu.Lock()
	defer c.reserveMu.Unlock()
	return c.reserve
}

// SetSharedHeadroom keeps, beside the repair reserve, the space headroom
// returns free for others that share the device (a node's KV replicas on
// its flash file system: their raft logs and memtable flushes must never
// meet a device that object writes filled, or the replicas fail-stop and
// the shard loses quorum). headroom is called on every new write; it
// should be cheap. nil keeps no headroom.
func (c *ChunkStore) SetSharedHeadroom(headroom func() base.Bytes) {
	c.reserveMu.Lock()
	defer c.reserveMu.Unlock()
	c.headroom = headroom
}

// checkRoom refuses a new write of n bytes that would eat into the repair
// reserve or the shared headroom.
func (c *ChunkStore) checkRoom(n int) error {
	c.reserveMu.Lock()
	reserve, headroomFn := c.reserve, c.headroom
	c.reserveMu.Unlock()
	if reserve == 0 && headroomFn == nil {
		return nil
	}
	capacity, free, ok, err := c.space()
	if err != nil {
		return fmt.Errorf("objstore: space of %s: %w", c.store.Name(), err)
	}
	if !ok {
		return nil
	}
	keep := base.Bytes(reserve * float64(capacity))
	var headroom base.Bytes
	if headroomFn != nil {
		headroom = headroomFn()
	}
	if free-base.Bytes(n) < keep+headroom {
		c.c.refusedFull.Add(1)
		if headroom > 0 {
			return base.NoSpaceErrorf("device %s is near full: %s free of %s, %s (%.1f%%) kept for repairs and %s for the KV replicas sharing it: refusing a new write of %s",
				c.store.Name(), free, capacity, keep, 100*reserve, headroom, base.Bytes(n))
		}
		return base.NoSpaceErrorf("device %s is near full: %s free of %s, %s (%.1f%%) kept for repairs: refusing a new write of %s",
			c.store.Name(), free, capacity, keep, 100*reserve, base.Bytes(n))
	}
	return nil
}
