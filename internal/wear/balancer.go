package wear

import (
	"errors"
	"fmt"
	"slices"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/invariants"
)

// Placer is the cluster's default placement: consistent hashing in the
// coordinator (hashring.Ring), the simulator's ring in the simulator. The
// balancer owns the interface; it never needs more than a walk.
type Placer interface {
	// Walk calls visit with distinct servers in the object's placement
	// order (its ring walk) until visit returns false or servers run out.
	Walk(id ObjectID, visit func(base.NodeID) bool)
}

// ServerStats is what the flash monitor reports for one server at the end
// of an epoch (paper 004 section III-A: erase count and space utilization).
type ServerStats struct {
	Node base.NodeID
	// Up: the server takes writes. A server that is not up is never a
	// target and is left out of the wear variance.
	Up bool
	// Erases is the server's cumulative block erase count.
	Erases float64
	// Utilization is the live fraction of the server's capacity, in [0, 1].
	Utilization float64
	// CapacityBytes is the server's usable capacity (0: unknown; then only
	// Utilization bounds placement).
	CapacityBytes int64
	// VictimUtilization is mu of eq. 2: the mean live fraction of the
	// blocks its garbage collection erased lately, in [0, 1).
	VictimUtilization float64
}

// server is the balancer's view of one server: the last stats and the
// flash monitor's erase rate.
type server struct {
	ServerStats
	// EraseRate is the erases of the last epoch (flash monitor).
	EraseRate float64
	reported  bool // stats seen at least once
}

// Entry is one object's row of the mapping table (paper 004 section III-C,
// Figure 3): its state, the source layout that holds the latest version
// while the state is intermediate, the destination layout (the current
// layout of a redundancy state), and the epoch of the last change (the
// metadata version).
type Entry struct {
	Object ObjectID
	State  State
	Src    Layout // zero unless State is intermediate
	Dst    Layout
	Epoch  uint32
}

// Readable is the layout that holds the object's latest version: the
// source of an intermediate state, else the destination (section III-C:
// reads of an intermediate state go to the source array).
func (e Entry) Readable() Layout {
	if e.State.Intermediate() {
		return e.Src
	}
	return e.Dst
}

// Check verifies the entry's invariants: a valid state, complete layouts
// of the redundancies the state implies, and a source exactly when the
// state is intermediate.
func (e Entry) Check() error {
	if !e.State.Valid() {
		return base.AssertionFailedf("wear: %v has state %v", e.Object, e.State)
	}
	if err := e.Dst.Check(); err != nil {
		return fmt.Errorf("%v destination: %w", e.Object, err)
	}
	if e.Dst.Redundancy != e.State.Target() {
		return base.AssertionFailedf("wear: %v in %v has a %v destination", e.Object, e.State, e.Dst.Redundancy)
	}
	if !e.State.Intermediate() {
		if !e.Src.IsZero() {
			return base.AssertionFailedf("wear: %v in %v has a source %v", e.Object, e.State, e.Src)
		}
		return nil
	}
	if err := e.Src.Check(); err != nil {
		return fmt.Errorf("%v source: %w", e.Object, err)
	}
	if e.Src.Redundancy != e.State.Source() {
		return base.AssertionFailedf("wear: %v in %v has a %v source", e.Object, e.State, e.Src.Redundancy)
	}
	return nil
}

func (e Entry) String() string {
	if e.State.Intermediate() {
		return fmt.Sprintf("%v %v src=%v dst=%v epoch=%d", e.Object, e.State, e.Src, e.Dst, e.Epoch)
	}
	return fmt.Sprintf("%v %v dst=%v epoch=%d", e.Object, e.State, e.Dst, e.Epoch)
}

// object is the balancer's working state for one object.
type object struct {
	entry Entry
	size  int64   // bytes of the latest version
	pop   float64 // eq. 1 popularity in writes, as of the last epoch end
	heat  float64 // eq. 1 applied to bytes written (for eq. 2)
	// writes and written accumulate during the current epoch.
	writes, written float64
	lastWrite       uint32 // epoch of the last write (or of the creation)
	since           uint32 // epoch the current intermediate state began
	converted       uint32 // epoch of the last change of redundancy (0: never)
	gen             uint64 // the balancer's sequence number at the entry's last change
	incarnation     uint64 // the sequence number at the object's creation
	moving          bool   // a Move for the current entry is outstanding
	// inflight counts moves issued and not yet reported (MoveDone or
	// MoveFailed), stale ones included: no move is issued while one is in
	// flight, so the cleanup of a stale move's copies never races a newer
	// move of the same object to the same servers.
	inflight uint8
}

// Balancer is the wear balancer: a pure state machine over the mapping
// table. Inputs: writes (PlanWrite, Commit), flash monitor statistics and
// time as epochs (Epoch), outcomes of moves (MoveDone, MoveFailed). Outputs:
// write plans, state changes and moves. It is not safe for concurrent use.
type Balancer struct {
	opts    Options
	placer  Placer
	epoch   uint32
	objs    []object
	byID    map[ObjectID]int32
	servers map[base.NodeID]*server
	table   Table
	// seq numbers changes, incarnations and moves, never reused, so that a
	// move issued for an earlier life of an object is never taken for one
	// of the current life.
	seq uint64
	// outstanding maps each move not yet reported to the incarnation of
	// the object it was issued for.
	outstanding map[uint64]uint64
	// avoid, while set (PlanWriteAvoiding), marks servers a writer could
	// not reach as down.
	avoid func(base.NodeID) bool
}

// New returns a balancer over the default placement placer.
func New(opts Options, placer Placer) (*Balancer, error) {
	o, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	if placer == nil {
		return nil, base.InvalidArgumentf("wear: no placer")
	}
	return &Balancer{
		opts: o, placer: placer, byID: map[ObjectID]int32{}, servers: map[base.NodeID]*server{},
		outstanding: map[uint64]uint64{},
	}, nil
}

// Options returns the options in force (defaults filled in).
func (b *Balancer) Options() Options { return b.opts }

// CurrentEpoch is the number of epochs ended so far.
func (b *Balancer) CurrentEpoch() uint32 { return b.epoch }

// Len is the number of objects.
func (b *Balancer) Len() int { return len(b.objs) }

// Entry returns an object's mapping-table row.
func (b *Balancer) Entry(id ObjectID) (Entry, bool) {
	o := b.lookup(id)
	if o == nil {
		return Entry{}, false
	}
	return o.entry, true
}

// Popularity returns an object's eq. 1 popularity as of the last epoch end.
func (b *Balancer) Popularity(id ObjectID) float64 {
	if o := b.lookup(id); o != nil {
		return o.pop
	}
	return 0
}

// Table is the mapping table with its epoch log.
func (b *Balancer) Table() *Table { return &b.table }

func (b *Balancer) lookup(id ObjectID) *object {
	i, ok := b.byID[id]
	if !ok {
		return nil
	}
	return &b.objs[i]
}

// defaultRedundancy is the redundancy a mode gives objects that nothing
// has moved: what an object without a mapping-table row has.
func (b *Balancer) defaultRedundancy() Redundancy { return b.opts.Initial }

// usable reports whether n may receive new parts of bytes bytes.
func (b *Balancer) usable(n base.NodeID) bool {
	if b.avoid != nil && b.avoid(n) {
		return false
	}
	s := b.servers[n]
	if s == nil || !s.reported {
		return true // no statistics yet: the placer's member list decides
	}
	// A caller's current view of liveness (avoid) replaces the last
	// epoch's: a server that came back since then takes writes again.
	return (s.Up || b.avoid != nil) && s.Utilization < b.opts.MaxUtilization
}

// up reports whether n takes writes (a part already on it may be updated).
func (b *Balancer) up(n base.NodeID) bool {
	if b.avoid != nil {
		return !b.avoid(n)
	}
	s := b.servers[n]
	return s == nil || !s.reported || s.Up
}

// place fills the parts of a r layout from the object's ring walk,
// skipping servers that are not usable or in avoid.
func (b *Balancer) place(id ObjectID, r Redundancy, avoid func(base.NodeID) bool) (Layout, error) {
	nodes := make([]base.NodeID, 0, MaxWidth)
	b.placer.Walk(id, func(n base.NodeID) bool {
		if b.usable(n) && (avoid == nil || !avoid(n)) {
			nodes = append(nodes, n)
		}
		return len(nodes) < r.Width()
	})
	if len(nodes) < r.Width() {
		return Layout{}, fmt.Errorf("wear: %v of %v needs %d usable servers, found %d", r, id, r.Width(), len(nodes))
	}
	return NewLayout(r, nodes)
}

// DefaultLayout is the layout an object without a mapping-table row has.
func (b *Balancer) DefaultLayout(id ObjectID) (Layout, error) {
	return b.place(id, b.defaultRedundancy(), nil)
}

// substitute replaces the parts of target that cannot be written: a server
// that is down, or one that is not usable for a part it does not already
// hold in old. The replacements come from the object's ring walk.
func (b *Balancer) substitute(id ObjectID, target, old Layout) (Layout, error) {
	keeps := func(i int) bool {
		n := target.Node(i)
		inPlace := old.Redundancy == target.Redundancy && old.Node(i) == n
		if inPlace {
			return b.up(n)
		}
		return b.usable(n)
	}
	for i := 0; i < target.Width(); i++ {
		if keeps(i) {
			continue
		}
		var repl base.NodeID
		b.placer.Walk(id, func(n base.NodeID) bool {
			if b.usable(n) && !target.Contains(n) {
				repl = n
				return false
			}
			return true
		})
		if repl == 0 {
			return Layout{}, fmt.Errorf("wear: no usable server to replace %v in %v of %v", target.Node(i), target, id)
		}
		target = target.With(i, repl)
	}
	return target, nil
}

// WritePlan says where the next version of an object goes. The caller
// writes New (every part; a part whose server and redundancy are unchanged
// from Old may be updated in place), then calls Commit; only after the
// commit may the parts of Old that New does not keep be released.
type WritePlan struct {
	Object ObjectID
	Old    Layout // where the latest version is (zero for a new object)
	New    Layout // where the written version goes
	State  State  // the object's state after the commit
}

func (p WritePlan) String() string {
	return fmt.Sprintf("%v write %v -> %v (%v)", p.Object, p.Old, p.New, p.State)
}

// PlanWrite decides where the next write of id goes: a redundancy state
// writes its layout; a late state converts on this write (late-REP writes
// REP to its destination, late-EC writes EC); an EWO state writes to its
// destination (endurance-aware write offloading). Under ModeREPEC a write
// always lands as REP. A new object gets the mode's initial redundancy on
// its default placement. It changes nothing.
func (b *Balancer) PlanWrite(id ObjectID) (WritePlan, error) {
	o := b.lookup(id)
	if o == nil {
		l, err := b.place(id, b.defaultRedundancy(), nil)
		if err != nil {
			return WritePlan{}, err
		}
		return WritePlan{Object: id, New: l, State: Stable(l.Redundancy)}, nil
	}
	e := o.entry
	old := e.Readable()
	target, state := e.Dst, Stable(e.State.Target())
	if b.opts.Mode == ModeREPEC {
		// Recently written data is replicated (HDFS-RAID): a write to an
		// object being encoded cancels the encoding, a write to an EC
		// object replicates it again.
		state = StateREP
		if old.Redundancy == REP {
			target = old
		} else {
			l, err := b.place(id, REP, nil)
			if err != nil {
				return WritePlan{}, err
			}
			target = l
		}
	}
	target, err := b.substitute(id, target, old)
	if err != nil {
		return WritePlan{}, err
	}
	return WritePlan{Object: id, Old: old, New: target, State: state}, nil
}

// PlanWriteAvoiding is PlanWrite with the caller's current view of which
// servers cannot take writes (the coordinator's liveness, the servers a
// writer could not reach in an earlier attempt): it replaces the liveness
// of the last epoch's statistics, which may be an epoch old.
func (b *Balancer) PlanWriteAvoiding(id ObjectID, avoid func(base.NodeID) bool) (WritePlan, error) {
	b.avoid = avoid
	defer func() { b.avoid = nil }()
	return b.PlanWrite(id)
}

// Relocate records that the object's latest version now lives on l, moved
// by something other than the balancer (re-protection of a dead server's
// part): the object is in a redundancy state on l, and whatever the
// balancer had planned for it is dropped (a move in flight goes stale).
func (b *Balancer) Relocate(id ObjectID, l Layout) error {
	if err := l.Check(); err != nil {
		return err
	}
	o := b.lookup(id)
	if o == nil {
		return nil
	}
	e := Entry{Object: id, State: Stable(l.Redundancy), Dst: l, Epoch: b.epoch}
	if o.entry.State == e.State && o.entry.Dst == l {
		return nil
	}
	b.change(o, e)
	return nil
}

// Commit records a write that PlanWrite planned and the caller made
// durable on every part of p.New: the object's layout becomes p.New in
// p.State (a late or EWO state ends here), its size is size and written
// bytes count toward its popularity (a write of 0 bytes, such as loading a
// data set that already existed, does not).
func (b *Balancer) Commit(p WritePlan, size, written int64) error {
	if err := p.New.Check(); err != nil {
		return err
	}
	if p.State.Intermediate() || p.State.Target() != p.New.Redundancy {
		return base.AssertionFailedf("wear: commit of %v in state %v", p.New, p.State)
	}
	if size < 0 || written < 0 {
		return base.InvalidArgumentf("wear: commit of %v with size %d, written %d", p.Object, size, written)
	}
	o := b.lookup(p.Object)
	if o == nil {
		o = b.add(object{entry: Entry{Object: p.Object}, lastWrite: b.epoch})
	}
	next := Entry{Object: p.Object, State: p.State, Dst: p.New, Epoch: o.entry.Epoch}
	if o.entry.State.Valid() && o.entry.Dst.Width() > 0 && o.entry.Readable().Redundancy != p.New.Redundancy {
		o.converted = b.epoch
	}
	if next != o.entry {
		next.Epoch = b.epoch
		b.change(o, next)
	}
	o.size = size
	if written > 0 {
		o.writes++
		o.written += float64(written)
		o.lastWrite = b.epoch
	}
	return nil
}

// add appends a new object (a new incarnation).
func (b *Balancer) add(o object) *object {
	b.seq++
	o.incarnation = b.seq
	b.byID[o.entry.Object] = int32(len(b.objs))
	b.objs = append(b.objs, o)
	return &b.objs[len(b.objs)-1]
}

// change replaces an object's entry and logs it. Every change passes here.
func (b *Balancer) change(o *object, e Entry) {
	_ = invariants.Check(e.Check() == nil, "wear: bad entry %v: %v", e, e.Check())
	if e.State.Intermediate() && (!o.entry.State.Intermediate() || o.entry.State != e.State) {
		o.since = b.epoch
	}
	o.entry = e
	b.seq++
	o.gen = b.seq
	o.moving = false
	b.table.append(e, false)
}

// Remove forgets a deleted object.
func (b *Balancer) Remove(id ObjectID) {
	i, ok := b.byID[id]
	if !ok {
		return
	}
	b.table.append(Entry{Object: id, Epoch: b.epoch}, true)
	last := int32(len(b.objs) - 1)
	if i != last {
		b.objs[i] = b.objs[last]
		b.byID[b.objs[i].entry.Object] = i
	}
	b.objs = b.objs[:last]
	delete(b.byID, id)
}

// Restore loads an object's row and size, as read back from a persisted
// mapping table or object index after a restart. Popularity starts at 0.
func (b *Balancer) Restore(e Entry, size int64) error {
	if err := e.Check(); err != nil {
		return err
	}
	b.seq++
	if o := b.lookup(e.Object); o != nil {
		o.entry, o.size = e, size
		o.gen = b.seq
		o.moving = false
		return nil
	}
	b.add(object{entry: e, size: size, lastWrite: b.epoch, since: e.Epoch, gen: b.seq})
	return nil
}

// Move asks the caller to copy an object's latest version from From to To
// now (EDM, the migration fallback of EWO states, REP+EC's age-based
// encoding). The object stays readable from From until MoveDone.
type Move struct {
	Object ObjectID
	From   Layout
	To     Layout
	Reason string
	// Bytes is what the move writes at its destinations (parts that change).
	Bytes int64
	id    uint64 // unique per move
	gen   uint64 // the entry's generation when issued
}

func (m Move) String() string {
	return fmt.Sprintf("%v move %v -> %v (%s, %d B)", m.Object, m.From, m.To, m.Reason, m.Bytes)
}

// ErrStaleMove is MoveDone's answer when the object changed (was written,
// removed or re-planned) since the move was issued: the caller drops the
// parts it copied, except those Keeps reports (a write may have put the
// very same part of the same version there); the object's row is unchanged.
var ErrStaleMove = errors.New("wear: move is stale (the object changed since)")

// MoveDone records that every part of m.To holds the object's latest
// version, verified: the object is now in a redundancy state on m.To, and
// the parts of m.From that m.To does not keep may be released.
//
// Every issued move must be reported exactly once, by MoveDone or
// MoveFailed.
func (b *Balancer) MoveDone(m Move) error {
	o := b.reported(m)
	if o == nil || !o.moving || o.gen != m.gen {
		return ErrStaleMove
	}
	if m.From.Redundancy != m.To.Redundancy {
		o.converted = b.epoch
	}
	b.change(o, Entry{Object: m.Object, State: Stable(m.To.Redundancy), Dst: m.To, Epoch: b.epoch})
	return nil
}

// Keeps reports whether part p of layout l is a part of the object's
// readable layout now. A mover that copied the latest version and then
// learned its move failed or went stale drops a copy only if the copy is
// not such a part of the version it copied (NB: compare the version too).
func (b *Balancer) Keeps(id ObjectID, l Layout, p int) bool {
	o := b.lookup(id)
	if o == nil {
		return false
	}
	r := o.entry.Readable()
	return r.Redundancy == l.Redundancy && p < r.Width() && r.Node(p) == l.Node(p)
}

// MoveFailed records that a move could not finish (or that a stale move's
// copies were dropped); a later epoch may issue it again. The object stays
// readable from its source. The caller drops the parts it copied.
func (b *Balancer) MoveFailed(m Move) {
	if o := b.reported(m); o != nil && o.gen == m.gen {
		o.moving = false
	}
}

// Superseded reports whether the object of an outstanding move changed
// since the move was issued (a write committed, it was removed, re-created
// or relocated): MoveDone would refuse the move with ErrStaleMove. A caller
// whose move did not finish counts it as superseded rather than failed: in
// an EWO state the write that superseded it carried the part to its
// destination itself. It does not take the move off the outstanding list.
func (b *Balancer) Superseded(m Move) bool {
	inc, ok := b.outstanding[m.id]
	if !ok {
		return false
	}
	o := b.lookup(m.Object)
	return o == nil || o.incarnation != inc || o.gen != m.gen
}

// reported takes a move off the outstanding list and returns its object
// if it is still the incarnation the move was issued for.
func (b *Balancer) reported(m Move) *object {
	inc, ok := b.outstanding[m.id]
	if !ok {
		return nil // reported twice, or never issued
	}
	delete(b.outstanding, m.id)
	o := b.lookup(m.Object)
	if o == nil || o.incarnation != inc {
		return nil
	}
	if o.inflight > 0 {
		o.inflight--
	}
	return o
}

// StateMix is the number of objects and their bytes in each state.
type StateMix struct {
	Objects [numStates]int64
	Bytes   [numStates]int64
}

// Of returns the objects and bytes in state s.
func (m StateMix) Of(s State) (objects, bytes int64) { return m.Objects[s], m.Bytes[s] }

// Mix counts the objects and bytes per state.
func (b *Balancer) Mix() StateMix {
	var m StateMix
	for i := range b.objs {
		s := b.objs[i].entry.State
		m.Objects[s]++
		m.Bytes[s] += b.objs[i].size
	}
	return m
}

// Entries returns every object's row, sorted by object.
func (b *Balancer) Entries() []Entry {
	out := make([]Entry, len(b.objs))
	for i := range b.objs {
		out[i] = b.objs[i].entry
	}
	slices.SortFunc(out, func(x, y Entry) int {
		switch {
		case x.Object < y.Object:
			return -1
		case x.Object > y.Object:
			return 1
		}
		return 0
	})
	return out
}

// CheckAll verifies every object's row (tests and invariants builds).
func (b *Balancer) CheckAll() error {
	for i := range b.objs {
		if err := b.objs[i].entry.Check(); err != nil {
			return err
		}
		if b.byID[b.objs[i].entry.Object] != int32(i) {
			return base.AssertionFailedf("wear: index of %v is stale", b.objs[i].entry.Object)
		}
	}
	return nil
}
