package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/wear"
)

// Config is one simulation.
type Config struct {
	// Servers in the fleet (1..100,000; the balancer needs 6 for EC).
	Servers  int
	Workload Workload
	// Policy configures the wear balancer (its Mode is the policy). The
	// simulator sets PageBytes and PagesPerBlock from the device.
	Policy wear.Options
	// Device is every server's flash. A zero LogicalBytes sizes it from the
	// workload: the REP footprint of the most loaded server (under the
	// default placement) over Fill.
	Device DeviceConfig
	// Fill is that footprint's share of the logical capacity when the
	// device is sized from the workload (default 0.7).
	Fill float64
	// FreshDevices leaves the devices as new after the preload: their free
	// space is erased, so nothing is erased until a server has written
	// past it. By default each device is preconditioned after the preload
	// (Device.Precondition): servers that have been in service, whose
	// every programmed page costs an erase (paper 004 eq. 2, "after GC
	// starts"). NB: with fresh devices the erase counts of a trace depend
	// on how much free space the device size leaves (Fill), not only on
	// the writes.
	FreshDevices bool
	// Epoch is the balancer's period in virtual time (default 1 hour).
	Epoch time.Duration
	// Seed drives the workload generator; a run is a function of Config.
	Seed int64
	// Progress, if set, is called about every percent of the requests.
	Progress func(Progress)
}

// Progress reports how far a run is.
type Progress struct {
	Done, Total int64
	Virtual     time.Duration
	Epoch       uint32
	CV          float64 // erase-count coefficient of variation at the last epoch
}

// EpochStats is what one epoch saw and decided.
type EpochStats struct {
	Epoch      uint32  `json:"epoch"`
	Hours      float64 `json:"hours"`
	EraseMean  float64 `json:"erase_mean"`
	EraseSigma float64 `json:"erase_sigma"`
	// EstimatedCV is the balancer's eq. 2 projection of sigma over mean
	// with its decisions applied (what its loops stop on).
	EstimatedCV float64          `json:"estimated_cv"`
	ARPT        bool             `json:"arpt"`
	HCDS        bool             `json:"hcds"`
	EDM         bool             `json:"edm"`
	LateREP     int              `json:"late_rep"`
	LateEC      int              `json:"late_ec"`
	Cancelled   int              `json:"cancelled"`
	Remapped    int              `json:"remapped"`
	Swapped     int              `json:"swapped"`
	Moves       int              `json:"moves"`
	MovedBytes  int64            `json:"moved_bytes"`
	StateBytes  map[string]int64 `json:"state_bytes"`
	TableRows   int              `json:"mapping_rows"`
	ChangedRows int              `json:"changed_rows"`
}

// Result is a run's outcome. Counters cover the trace only (the preload
// is left out).
type Result struct {
	Workload    string  `json:"workload"`
	Policy      string  `json:"policy"`
	Initial     string  `json:"initial_redundancy"`
	Servers     int     `json:"servers"`
	Seed        int64   `json:"seed"`
	HostManaged bool    `json:"host_managed"`
	Requests    int64   `json:"requests"`
	Writes      int64   `json:"writes"`
	Objects     int64   `json:"objects"`
	Epochs      int     `json:"epochs"`
	VirtualHour float64 `json:"virtual_hours"`

	EraseSigma  float64 `json:"erase_sigma"`
	EraseMean   float64 `json:"erase_mean"`
	EraseMin    float64 `json:"erase_min"`
	EraseMax    float64 `json:"erase_max"`
	ErasesTotal float64 `json:"erases_total"`
	EraseCV     float64 `json:"erase_cv"`
	WriteAmp    float64 `json:"write_amplification"`
	HostPages   int64   `json:"host_pages_written"`
	GCPages     int64   `json:"gc_pages_copied"`
	// LatencyUs is the mean latency of a write request at one SSD, from
	// its arrival to its last program (the paper's Figure 6 measure);
	// ClientLatUs the mean client write: the reads it needs first (an EC
	// read-modify-write, the old version for a new layout), then its
	// slowest part.
	LatencyUs   float64 `json:"write_latency_us_mean"`
	ClientLatUs float64 `json:"client_write_latency_us_mean"`
	// RMWReadPages are the pages EC read-modify-writes read (old data and
	// parity, or the rest of the row) before programming.
	RMWReadPages int64 `json:"ec_rmw_pages_read"`
	// RelayoutPages are the pages writes programmed into parts on a new
	// layout (late-REP and late-EC conversions, EWO offloads): the whole
	// part, not only the pages the write brought; RelayoutReadPages the
	// pages of the old version they read to do so.
	RelayoutPages int64 `json:"relayout_pages_written"`
	// ConversionPages is the part of RelayoutPages written by conversions
	// (REP to EC or back); the rest moved a part (EWO).
	ConversionPages   int64 `json:"conversion_pages_written"`
	RelayoutReadPages int64 `json:"relayout_pages_read"`
	// REPPages is the part of HostPages that client writes programmed
	// into REP copies (HostPages also counts the pages of EC shards and
	// the copies of moves).
	REPPages    int64 `json:"rep_pages_written"`
	MovedBytes  int64 `json:"moved_bytes"`
	Moves       int64 `json:"moves"`
	MovesFailed int64 `json:"moves_failed"`
	// WriteRetries counts writes placed again because a server was full.
	WriteRetries int64            `json:"write_retries"`
	Remapped     int64            `json:"remapped"`
	Swapped      int64            `json:"swapped"`
	LateREP      int64            `json:"late_rep"`
	LateEC       int64            `json:"late_ec"`
	MaxUtil      float64          `json:"max_utilization"`
	DevicePages  int64            `json:"device_physical_pages"`
	MappingRows  int              `json:"mapping_rows"`
	EntryBytes   int64            `json:"mapping_bytes"`
	StateObjects map[string]int64 `json:"state_objects"`

	ServerErases []float64 `json:"server_erases"`
	// PerServer is each server's flash activity over the trace (server
	// i+1 at index i).
	PerServer []ServerResult `json:"per_server"`
	EpochLog  []EpochStats   `json:"epoch_log"`
}

// ServerResult is one server's flash activity over the trace: the pages
// the host programmed, the pages garbage collection copied, the block
// erases, the GC victims' mean valid fraction (mu), and its utilization
// (live pages over logical capacity) at the end.
type ServerResult struct {
	HostPages   int64   `json:"host_pages"`
	GCPages     int64   `json:"gc_pages"`
	Erases      int64   `json:"erases"`
	VictimMu    float64 `json:"victim_mu"`
	Utilization float64 `json:"utilization"`
}

// objState is the simulator's record of one object: which of its pages
// hold data and the part on each server of its readable layout.
type objState struct {
	written uint64
	parts   [wear.MaxWidth]int32
	exists  bool
}

type simulator struct {
	cfg      Config
	devs     []*Device
	b        *wear.Balancer
	objPages int
	objs     []objState
	baseline []Counters
	lastMu   []Counters // counters at the previous epoch (for mu per epoch)
	mu       []float64

	reqs, writes      int64
	latSum, clientSum float64
	latN, clientN     int64
	moved, moves      int64
	rmwReads          int64 // pages read by EC read-modify-writes
	relayoutReads     int64 // pages read to rewrite an object on a new layout
	relayoutPages     int64 // pages written to parts on a new layout by writes
	conversionPages   int64 // the part of relayoutPages that changed redundancy
	repPages          int64 // pages client writes programmed into REP copies
	movesFailed       int64
	writeRetries      int64
	remapped, swapped int64
	lateREP, lateEC   int64
	epochs            []EpochStats
	readTurn          int
	lastCV            float64
}

// Validate checks a configuration and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Servers < 1 || c.Servers > 100_000 {
		return c, base.InvalidArgumentf("sim: %d servers (want 1..100000)", c.Servers)
	}
	if c.Workload.Open == nil || c.Workload.ObjectBytes < DefaultPageBytes {
		return c, base.InvalidArgumentf("sim: no workload")
	}
	if c.Fill == 0 {
		c.Fill = 0.7
	}
	if !(c.Fill > 0 && c.Fill <= 1) {
		return c, base.InvalidArgumentf("sim: fill %g outside (0, 1]", c.Fill)
	}
	if c.Epoch == 0 {
		c.Epoch = time.Hour
	}
	if c.Epoch < time.Second {
		return c, base.InvalidArgumentf("sim: epoch %v (want at least 1s)", c.Epoch)
	}
	return c, nil
}

// sizeDevices sets the logical capacity from the REP footprint of the most
// loaded server under the default placement.
func sizeDevices(c *Config, r *ring) {
	if c.Device.LogicalBytes != 0 {
		return
	}
	page := int64(DefaultPageBytes)
	if c.Device.PageBytes != 0 {
		page = int64(c.Device.PageBytes)
	}
	parts := make([]int64, c.Servers+1)
	objects := c.Workload.Dataset / c.Workload.ObjectBytes
	for i := int64(0); i < objects; i++ {
		k := 0
		r.Walk(wear.ObjectID(i+1), func(n base.NodeID) bool {
			parts[n]++
			k++
			return k < wear.RepCopies
		})
	}
	most := int64(0)
	for _, p := range parts {
		most = max(most, p)
	}
	logical := int64(math.Ceil(float64(most*c.Workload.ObjectBytes)/c.Fill/float64(page))) * page
	c.Device.LogicalBytes = max(logical, 64*page)
}

// Run simulates the workload on the fleet under the policy, in virtual
// time, and returns what it measured. It is deterministic for a Config.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	s, err := run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s.result(), nil
}

func run(ctx context.Context, cfg Config) (*simulator, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	placement := newRing(c.Servers)
	sizeDevices(&c, placement)
	s := &simulator{cfg: c}
	for i := 0; i < c.Servers; i++ {
		d, err := NewDevice(c.Device)
		if err != nil {
			return nil, err
		}
		s.devs = append(s.devs, d)
	}
	dc := s.devs[0].Config()
	if int(c.Workload.ObjectBytes)%dc.PageBytes != 0 || c.Workload.ObjectBytes/int64(dc.PageBytes) > MaxPartPages {
		return nil, base.InvalidArgumentf("sim: object of %d bytes on %d-byte pages (at most %d pages)", c.Workload.ObjectBytes, dc.PageBytes, MaxPartPages)
	}
	s.objPages = int(c.Workload.ObjectBytes / int64(dc.PageBytes))
	pol := c.Policy
	pol.PageBytes = dc.PageBytes
	pol.PagesPerBlock = int(s.devs[0].PagesPerEraseUnit())
	if s.b, err = wear.New(pol, placement); err != nil {
		return nil, err
	}
	s.mu = make([]float64, c.Servers)
	if c.Workload.Preload {
		if err := s.preload(ctx); err != nil {
			return nil, err
		}
	}
	for _, d := range s.devs {
		if !c.FreshDevices {
			d.Precondition()
		}
		s.baseline = append(s.baseline, d.Counters())
		s.lastMu = append(s.lastMu, d.Counters())
		clear(d.busyUntil)
	}
	if err := s.replay(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *simulator) object(idx int64) *objState {
	for int64(len(s.objs)) <= idx {
		s.objs = append(s.objs, objState{})
	}
	return &s.objs[idx]
}

func (s *simulator) preload(ctx context.Context) error {
	n := s.cfg.Workload.Dataset / s.cfg.Workload.ObjectBytes
	all := uint64(1)<<uint(s.objPages) - 1
	if s.objPages == 64 {
		all = ^uint64(0)
	}
	for i := int64(0); i < n; i++ {
		if i%65536 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.write(i, all, 0, false); err != nil {
			return fmt.Errorf("sim: preload of object %d: %w", i, err)
		}
	}
	return nil
}

// partPages is the size of one part of an object.
func (s *simulator) partPages(r wear.Redundancy) int {
	if r == wear.EC {
		return (s.objPages + wear.ECData - 1) / wear.ECData
	}
	return s.objPages
}

// partMask maps object pages to the pages of part p: a copy holds every
// page; data shard k holds pages i with i mod 4 == k at i/4 (4 KiB stripe
// units); a parity shard holds every row that has a page in the set.
func partMask(r wear.Redundancy, p int, pages uint64) uint64 {
	if r == wear.REP {
		return pages
	}
	var m uint64
	for x := pages; x != 0; x &= x - 1 {
		i := bits.TrailingZeros64(x)
		if p >= wear.ECData || i%wear.ECData == p {
			m |= 1 << uint(i/wear.ECData)
		}
	}
	return m
}

func (s *simulator) dev(n base.NodeID) *Device { return s.devs[n-1] }

// write carries out one write of pages of object idx at virtual time now
// as the balancer plans it: parts kept in place are updated where the
// pages land, parts on new servers are written whole (the rest read from
// the old layout), old parts not kept are trimmed after the commit. A
// server whose device is full fails the write there, as a node out of
// space would: the writer drops what it wrote to new parts and asks for a
// plan without that server.
func (s *simulator) write(idx int64, pages uint64, now int64, measured bool) error {
	var full []base.NodeID
	for attempt := 0; ; attempt++ {
		err := s.writeOnce(idx, pages, now, measured, full)
		var df *deviceFull
		if !errors.As(err, &df) || attempt == 3 {
			return err
		}
		full = append(full, df.node)
		s.writeRetries++
	}
}

// deviceFull is a write refused by a full server.
type deviceFull struct {
	node base.NodeID
	err  error
}

func (e *deviceFull) Error() string { return fmt.Sprintf("server %v: %v", e.node, e.err) }
func (e *deviceFull) Unwrap() error { return e.err }

func (s *simulator) writeOnce(idx int64, pages uint64, now int64, measured bool, avoid []base.NodeID) error {
	id := wear.ObjectID(idx + 1)
	st := s.object(idx)
	plan, err := s.b.PlanWriteAvoiding(id, func(n base.NodeID) bool { return slices.Contains(avoid, n) })
	if err != nil {
		return err
	}
	written := st.written | pages
	var newParts [wear.MaxWidth]int32
	kept := [wear.MaxWidth]bool{}
	fresh := [wear.MaxWidth]bool{}
	anyFresh := false
	for p := 0; p < plan.New.Width(); p++ {
		kept[p] = st.exists && plan.Old.Redundancy == plan.New.Redundancy && plan.Old.Node(p) == plan.New.Node(p)
		anyFresh = anyFresh || !kept[p]
	}
	// Phase 1, the reads the write needs before it can program a page. A
	// part written whole on a new server (a conversion, an offload) needs
	// the pages of the object this write does not bring: the writer reads
	// them once from the old layout, and with the whole object in hand
	// computes every part. Otherwise an EC update of part of a stripe row
	// is a read-modify-write of its parity (ecRMWReads).
	var reads [wear.MaxWidth]int
	if st.exists {
		switch {
		case anyFresh:
			reads = layoutReads(plan.Old, st.written&^pages, s.readTurn)
			s.readTurn++
		case plan.New.Redundancy == wear.EC:
			reads = ecRMWReads(st.written, pages)
		}
	}
	readLat, readPages := int64(0), int64(0)
	for p, n := range reads {
		if n > 0 {
			readLat = max(readLat, s.dev(plan.Old.Node(p)).Read(n, now))
			readPages += int64(n)
		}
	}
	// Phase 2, the programs, issued when the reads are back.
	at := now + readLat
	writeLat := int64(0)
	latSum, latN := 0.0, int64(0)
	relayout, programmed := int64(0), int64(0)
	for p := 0; p < plan.New.Width(); p++ {
		n := plan.New.Node(p)
		d := s.dev(n)
		var part int32
		var mask uint64
		if kept[p] {
			part, mask = st.parts[p], partMask(plan.New.Redundancy, p, pages)
		} else {
			if part, err = d.NewPart(s.partPages(plan.New.Redundancy)); err != nil {
				return err
			}
			fresh[p] = true
			mask = partMask(plan.New.Redundancy, p, written)
			if st.exists {
				relayout += int64(bits.OnesCount64(mask))
			}
		}
		newParts[p] = part
		if mask == 0 {
			continue
		}
		lat, err := d.Write(part, mask, at)
		if err != nil {
			if errors.Is(err, ErrDeviceFull) {
				for q := 0; q <= p; q++ {
					if fresh[q] {
						s.dev(plan.New.Node(q)).FreePart(newParts[q])
					}
				}
				return &deviceFull{node: n, err: err}
			}
			return fmt.Errorf("server %v: %w", n, err)
		}
		programmed += int64(bits.OnesCount64(mask))
		latSum += float64(lat)
		latN++
		writeLat = max(writeLat, lat)
	}
	size := s.cfg.Workload.ObjectBytes
	wb := int64(0)
	if measured {
		wb = int64(bits.OnesCount64(pages)) * int64(s.devs[0].Config().PageBytes)
		s.latSum += latSum
		s.latN += latN
		s.clientSum += float64(readLat + writeLat)
		s.clientN++
		if anyFresh {
			s.relayoutReads += readPages
		} else {
			s.rmwReads += readPages
		}
		s.relayoutPages += relayout
		if plan.New.Redundancy == wear.REP {
			s.repPages += programmed
		}
		if plan.Old.Redundancy != plan.New.Redundancy {
			s.conversionPages += relayout
		}
	}
	if err := s.b.Commit(plan, size, wb); err != nil {
		return err
	}
	if st.exists {
		for p := 0; p < plan.Old.Width(); p++ {
			if !kept[p] {
				s.dev(plan.Old.Node(p)).FreePart(st.parts[p])
			}
		}
	}
	st.parts, st.written, st.exists = newParts, written, true
	return nil
}

// ecRMWReads is what an in-place EC write of pages reads first, per part,
// when the object already holds the pages in existing. For each stripe row
// (ECData consecutive pages, one 4 KiB unit per data shard) that the write
// touches and that holds data, the new parity needs either the old data of
// the units overwritten and the ECParity old parity units (a delta update:
// parity' = parity + coefficient * (data' - data)), or the row's other data
// units (a reconstruct write); the writer takes whichever reads fewer, the
// delta update on a tie. Units never written are zeros and need no read; a
// write of a whole row reads nothing.
func ecRMWReads(existing, pages uint64) [wear.MaxWidth]int {
	var reads [wear.MaxWidth]int
	rows := partMask(wear.EC, wear.ECData, pages)
	for x := rows; x != 0; x &= x - 1 {
		r := bits.TrailingZeros64(x)
		row := uint64(1)<<wear.ECData - 1
		shift := uint(r * wear.ECData)
		e, w := existing>>shift&row, pages>>shift&row
		if e == 0 {
			continue
		}
		overwritten, others := e&w, e&^w
		delta := bits.OnesCount64(overwritten) + wear.ECParity
		if bits.OnesCount64(others) < delta {
			for y := others; y != 0; y &= y - 1 {
				reads[bits.TrailingZeros64(y)]++
			}
			continue
		}
		for y := overwritten; y != 0; y &= y - 1 {
			reads[bits.TrailingZeros64(y)]++
		}
		for q := wear.ECData; q < wear.MaxWidth; q++ {
			reads[q]++
		}
	}
	return reads
}

// layoutReads is a read of pages of an object from layout l, per part: one
// copy of a REP layout (turn picks which), the data shards of an EC one.
func layoutReads(l wear.Layout, pages uint64, turn int) [wear.MaxWidth]int {
	var reads [wear.MaxWidth]int
	if pages == 0 || l.Width() == 0 {
		return reads
	}
	if l.Redundancy == wear.REP {
		reads[turn%l.Width()] = bits.OnesCount64(pages)
		return reads
	}
	for p := 0; p < wear.ECData; p++ {
		reads[p] = bits.OnesCount64(partMask(wear.EC, p, pages))
	}
	return reads
}

// read charges a read of pages of object idx to its readable layout.
func (s *simulator) read(idx int64, pages uint64, now int64) {
	if idx >= int64(len(s.objs)) || !s.objs[idx].exists {
		return
	}
	st := &s.objs[idx]
	e, ok := s.b.Entry(wear.ObjectID(idx + 1))
	if !ok {
		return
	}
	l := e.Readable()
	pages &= st.written
	if l.Redundancy == wear.REP {
		s.readTurn++
		s.dev(l.Node(s.readTurn%l.Width())).Read(bits.OnesCount64(pages), now)
		return
	}
	for p := 0; p < wear.ECData; p++ {
		if m := partMask(wear.EC, p, pages); m != 0 {
			s.dev(l.Node(p)).Read(bits.OnesCount64(m), now)
		}
	}
}

// move carries out a balancer move now: the parts that change are copied
// whole, the move is confirmed, and the source parts not kept trimmed.
func (s *simulator) move(m wear.Move, now int64) error {
	idx := int64(m.Object) - 1
	st := &s.objs[idx]
	newParts := st.parts
	changed := [wear.MaxWidth]bool{}
	for p := 0; p < m.To.Width(); p++ {
		if m.From.Redundancy == m.To.Redundancy && m.From.Node(p) == m.To.Node(p) {
			continue
		}
		changed[p] = true
		d := s.dev(m.To.Node(p))
		part, err := d.NewPart(s.partPages(m.To.Redundancy))
		if err != nil {
			return err
		}
		newParts[p] = part
		mask := partMask(m.To.Redundancy, p, st.written)
		if mask == 0 {
			continue
		}
		s.dev(m.From.Node(min(p, m.From.Width()-1))).Read(bits.OnesCount64(mask), now)
		if _, err := d.Write(part, mask, now); err != nil {
			if !errors.Is(err, ErrDeviceFull) {
				return fmt.Errorf("server %v: move of %v: %w", m.To.Node(p), m.Object, err)
			}
			// The destination filled up since the balancer chose it: the
			// move fails as a mover's would, and what it copied is dropped.
			for q := 0; q <= p; q++ {
				if changed[q] {
					s.dev(m.To.Node(q)).FreePart(newParts[q])
				}
			}
			s.b.MoveFailed(m)
			s.movesFailed++
			return nil
		}
		s.moved += int64(bits.OnesCount64(mask)) * int64(d.Config().PageBytes)
	}
	s.moves++
	if err := s.b.MoveDone(m); err != nil {
		// Moves run at once here, so nothing changes in between.
		return fmt.Errorf("sim: %v: %w", m, err)
	}
	for p := 0; p < m.From.Width(); p++ {
		if m.From.Redundancy != m.To.Redundancy || changed[p] {
			s.dev(m.From.Node(p)).FreePart(st.parts[p])
		}
	}
	st.parts = newParts
	return nil
}

// epoch ends an epoch at virtual time at: the flash monitor reports, the
// balancer decides, moves run.
func (s *simulator) epoch(at int64) error {
	stats := make([]wear.ServerStats, len(s.devs))
	for i, d := range s.devs {
		c := d.Counters()
		since := c.Sub(s.lastMu[i])
		if since.Victims > 0 {
			s.mu[i] = since.VictimUtilization(d.PagesPerEraseUnit())
		}
		s.lastMu[i] = c
		stats[i] = wear.ServerStats{
			Node: base.NodeID(i + 1), Up: true,
			Erases:            float64(c.Sub(s.baseline[i]).Erases),
			Utilization:       float64(d.LivePages()) / float64(d.LogicalPages()),
			CapacityBytes:     d.LogicalPages() * int64(d.Config().PageBytes),
			VictimUtilization: math.Min(s.mu[i], 0.99),
		}
	}
	dec, err := s.b.Epoch(stats)
	if err != nil {
		return err
	}
	s.lastCV = dec.CV()
	es := EpochStats{
		Epoch: dec.Epoch, Hours: time.Duration(at).Hours(), EraseMean: dec.Mean, EraseSigma: dec.Sigma, EstimatedCV: dec.SigmaEstimated,
		ARPT: dec.ARPT, HCDS: dec.HCDS, EDM: dec.EDM, LateREP: dec.LateREP, LateEC: dec.LateEC,
		Cancelled: dec.Cancelled, Remapped: dec.Remapped, Swapped: dec.Swapped, Moves: len(dec.Moves),
		ChangedRows: len(dec.Changed),
	}
	before := s.moved
	for _, m := range dec.Moves {
		if err := s.move(m, at); err != nil {
			return err
		}
	}
	es.MovedBytes = s.moved - before
	s.remapped += int64(dec.Remapped)
	s.swapped += int64(dec.Swapped)
	s.lateREP += int64(dec.LateREP)
	s.lateEC += int64(dec.LateEC)
	mix := s.b.Mix()
	es.StateBytes = map[string]int64{}
	for _, st := range wear.States() {
		_, b := mix.Of(st)
		es.StateBytes[st.String()] = b
	}
	es.TableRows = s.b.Table().Rows()
	s.epochs = append(s.epochs, es)
	return nil
}

func (s *simulator) replay(ctx context.Context) error {
	src, err := s.cfg.Workload.Open(s.cfg.Seed)
	if err != nil {
		return err
	}
	page := int64(s.devs[0].Config().PageBytes)
	objBytes := s.cfg.Workload.ObjectBytes
	next := int64(s.cfg.Epoch)
	total := s.cfg.Workload.Requests
	step := max(total/100, 1)
	for {
		r, ok, err := src.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		at := int64(r.At)
		for at >= next {
			if err := s.epoch(next); err != nil {
				return err
			}
			next += int64(s.cfg.Epoch)
		}
		if !r.Continued {
			s.reqs++
			if r.Write {
				s.writes++
			}
		}
		if s.reqs%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if s.cfg.Progress != nil && s.reqs%step == 0 {
			s.cfg.Progress(Progress{Done: s.reqs, Total: total, Virtual: r.At, Epoch: s.b.CurrentEpoch(), CV: s.lastCV})
		}
		if r.Length <= 0 || r.Offset < 0 {
			return base.InvalidArgumentf("sim: request %d: %d bytes at %d", s.reqs, r.Length, r.Offset)
		}
		for off, end := r.Offset, r.Offset+r.Length; off < end; {
			idx := off / objBytes
			pieceEnd := min(end, (idx+1)*objBytes)
			first, last := (off%objBytes)/page, ((pieceEnd-1)%objBytes)/page
			mask := (uint64(1)<<uint(last-first+1) - 1) << uint(first)
			if last-first+1 == 64 {
				mask = ^uint64(0)
			}
			if r.Write {
				if err := s.write(idx, mask, at, true); err != nil {
					if errors.Is(err, ErrDeviceFull) {
						return fmt.Errorf("sim: %w (the fleet is too full: lower --fill or add servers)", err)
					}
					return err
				}
			} else {
				s.read(idx, mask, at)
			}
			off = pieceEnd
		}
	}
	return nil
}

func (s *simulator) result() *Result {
	opts := s.b.Options()
	r := &Result{
		Workload: s.cfg.Workload.Name, Policy: opts.Mode.String(), Initial: opts.Initial.String(),
		Servers: s.cfg.Servers, Seed: s.cfg.Seed, HostManaged: s.devs[0].Config().HostManaged,
		Requests: s.reqs, Writes: s.writes, Objects: int64(s.b.Len()), Epochs: len(s.epochs),
		RMWReadPages: s.rmwReads, RelayoutPages: s.relayoutPages, ConversionPages: s.conversionPages, RelayoutReadPages: s.relayoutReads,
		REPPages:   s.repPages,
		MovedBytes: s.moved, Moves: s.moves, MovesFailed: s.movesFailed, WriteRetries: s.writeRetries, Remapped: s.remapped, Swapped: s.swapped,
		LateREP: s.lateREP, LateEC: s.lateEC, DevicePages: s.devs[0].PhysicalPages(),
		EpochLog: s.epochs, StateObjects: map[string]int64{},
	}
	if n := len(s.epochs); n > 0 {
		r.VirtualHour = s.epochs[n-1].Hours
	}
	var sum, sumSq float64
	r.EraseMin = math.Inf(1)
	for i, d := range s.devs {
		c := d.Counters().Sub(s.baseline[i])
		e := float64(c.Erases)
		r.ServerErases = append(r.ServerErases, e)
		r.PerServer = append(r.PerServer, ServerResult{
			HostPages: c.HostPages, GCPages: c.GCPages, Erases: c.Erases,
			VictimMu:    c.VictimUtilization(d.PagesPerEraseUnit()),
			Utilization: float64(d.LivePages()) / float64(d.LogicalPages()),
		})
		sum += e
		sumSq += e * e
		r.EraseMin = math.Min(r.EraseMin, e)
		r.EraseMax = math.Max(r.EraseMax, e)
		r.HostPages += c.HostPages
		r.GCPages += c.GCPages
		r.MaxUtil = math.Max(r.MaxUtil, float64(d.LivePages())/float64(d.LogicalPages()))
	}
	n := float64(len(s.devs))
	r.ErasesTotal = sum
	r.EraseMean = sum / n
	r.EraseSigma = math.Sqrt(math.Max(0, sumSq/n-r.EraseMean*r.EraseMean))
	if r.EraseMean > 0 {
		r.EraseCV = r.EraseSigma / r.EraseMean
	}
	if r.HostPages > 0 {
		r.WriteAmp = float64(r.HostPages+r.GCPages) / float64(r.HostPages)
	}
	if s.latN > 0 {
		r.LatencyUs = s.latSum / float64(s.latN) / 1e3
	}
	if s.clientN > 0 {
		r.ClientLatUs = s.clientSum / float64(s.clientN) / 1e3
	}
	s.b.Compact()
	r.MappingRows = s.b.Table().Rows()
	for _, e := range s.b.Entries() {
		if _, ok := s.b.Table().Row(e.Object); ok {
			r.EntryBytes += int64(len(e.AppendBinary(nil)))
		}
	}
	mix := s.b.Mix()
	for _, st := range wear.States() {
		o, _ := mix.Of(st)
		r.StateObjects[st.String()] = o
	}
	return r
}

// checkObjects verifies that every object's parts are on the servers of
// its readable layout and hold exactly its pages, and that the devices hold
// nothing else (no part leaked by a conversion or a move).
func (s *simulator) checkObjects() error {
	want := make([]int64, len(s.devs))
	for idx := range s.objs {
		st := &s.objs[idx]
		if !st.exists {
			continue
		}
		e, ok := s.b.Entry(wear.ObjectID(idx + 1))
		if !ok {
			return fmt.Errorf("object %d has parts but no row", idx)
		}
		l := e.Readable()
		for p := 0; p < l.Width(); p++ {
			d := s.dev(l.Node(p))
			m := partMask(l.Redundancy, p, st.written)
			if got := d.Written(st.parts[p]); got != m {
				return fmt.Errorf("object %d (%v) part %d on %v holds pages %#x, want %#x", idx, e, p, l.Node(p), got, m)
			}
			want[l.Node(p)-1] += int64(bits.OnesCount64(m))
		}
	}
	for i, d := range s.devs {
		if d.LivePages() != want[i] {
			return fmt.Errorf("server %d holds %d live pages, its parts %d", i+1, d.LivePages(), want[i])
		}
		if err := d.checkConsistency(); err != nil {
			return fmt.Errorf("server %d: %w", i+1, err)
		}
	}
	return nil
}
