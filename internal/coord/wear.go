package coord

import (
	"context"
	"fmt"
	"github.com/flashmend/flashmend/internal/coord/hashring"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wear"
)

// The coordinator runs Chameleon's wear balancer (internal/wear) on the
// cluster: every epoch the nodes' heartbeats (device erase counts, capacity
// and use) are the flash monitor's statistics; a put is placed where the
// balancer plans it (a late conversion or an offloaded write happens then);
// the moves it asks for (the EWO migration fallback, EDM's migrations) are
// handed to a mover (client.RunWearMoves) that carries each out as a
// replacement of one part: BeginReplace with the destination, a re-copy
// verified chunk by chunk from the other parts, CommitReplace. The source
// part becomes garbage only once the commit has switched the record. A
// move that did not finish is counted superseded when its object changed
// since the epoch issued it (a put of a newer version, which CommitReplace
// never overwrites: it compares the record's revision; a removal; a
// re-protection), and otherwise failed with a reason (destination down,
// copy failed, ...), both shown by `ctl wear`. The destination of a move
// that failed to copy (or found it down) counts as down for the balancer
// until the node heartbeats again or its lease lapses, so a node killed
// during a move is not handed the same moves in the epochs before its
// lease runs out.
//
// Rows of the mapping table (wear.Entry) are kept in etcd under
// wearRowsPrefix, one key per object whose row is not the default, the
// value the row's checksummed encoding. They are written after the change
// they record (at the next epoch), not in the same transaction: at start
// every object's row is reconciled with its record, and a row whose
// readable layout is not the record's placement is dropped (the object is
// then in a redundancy state where its record says). A crash can lose a
// pending late or EWO decision, never an object.
const wearRowsPrefix = prefix + "wear/rows/"

// WearConfig turns the wear balancer on.
type WearConfig struct {
	// Policy is "" (off: puts placed by consistent hashing with the
	// redundancy the client asks), or rep, ec, edm, chameleon (rep+ec's
	// background encoding runs in the simulator only).
	Policy string
	// Redundancy is the initial redundancy of edm and chameleon: ec
	// (default) or rep.
	Redundancy string
	// Epoch is the balancer's period (default 1 minute).
	Epoch time.Duration
	// Options tunes the balancer (thresholds, budgets); Mode and Initial
	// come from Policy and Redundancy.
	Options wear.Options
	// MoveTimeout: a move handed to a mover and not reported within it is
	// counted failed (default 5 minutes; its pending replacement expires on
	// its own).
	MoveTimeout time.Duration
}

// wearHost is the balancer and what the coordinator keeps around it.
type wearHost struct {
	cfg  WearConfig
	logf func(string, ...any)

	mu    sync.Mutex
	b     *wear.Balancer
	keys  map[wear.ObjectID]string
	ring  *hashring.Ring
	plans map[uint64]wearPlan // by version, BeginPut -> CommitPut
	// queued moves wait for a mover; out are handed out, by move id.
	queued []*wearMove
	out    map[uint64]*wearMove
	nextID uint64
	last   wear.Decisions
	// Counters since the coordinator started: moves done, superseded (the
	// object changed since the epoch issued the move) and failed, by
	// reason.
	done, superseded, failed, movedBytes int64
	failedBy                             map[string]int64
	// recent holds the latest moves' outcomes, oldest first (at most
	// maxRecentMoves), for `ctl wear`.
	recent []*coordpb.WearMoveOutcome
	// unheard holds the destinations of moves that failed to copy or
	// found them down, each with its heartbeat time (NodeInfo's
	// heartbeat_unix_ms) read when the move failed: the balancer counts
	// such a node down until a newer heartbeat arrives or its lease
	// lapses. NB: without it a node killed during a move stays live for
	// the rest of its lease, and the next epoch hands it the same moves
	// again (the chameleon-live run: two ewo-fallback moves to the killed
	// node, failed twice).
	unheard map[uint64]int64
}

// maxRecentMoves bounds the outcomes WearStatus reports.
const maxRecentMoves = 32

// Outcomes of a wear move.
const (
	moveDone       = "done"
	moveSuperseded = "superseded"
	moveFailed     = "failed"
	moveTimedOut   = "timed out"
)

// Why a move did not finish (WearMoveOutcome.why, the keys of
// moves_failed_by_reason).
const (
	whyNewerVersion    = "a newer version was written"
	whyRemoved         = "the object was removed"
	whyRowChanged      = "the object's row changed (a write, a re-protection)"
	whyRowOutOfDate    = "the record's layout is not the move's source"
	whyNotSinglePart   = "not one part of one redundancy"
	whyLookup          = "record lookup failed"
	whyTimedOut        = "no mover reported in time"
	whyDestinationDown = "destination node down"
	whyPartDown        = "a node holding a part down"
	whyDestinationBusy = "destination holds garbage or a pending part of the version"
	whyBeginRefused    = "begin refused"
	whyCopyFailed      = "copy failed"
	whyCommitRefused   = "commit refused"
	whyMoverError      = "mover error"
)

// finish counts a move that did not finish and remembers it: superseded
// (not a failure) or failed for reason why. Called with h.mu held.
func (h *wearHost) finish(mv *wearMove, superseded bool, outcome, why, errText string, now time.Time) {
	if superseded {
		h.superseded++
		outcome = moveSuperseded
	} else {
		h.failed++
		h.failedBy[why]++
	}
	h.record(mv, outcome, why, errText, now)
	where := mv.m.String()
	if mv.slot >= 0 {
		where = fmt.Sprintf("%q slot %d from node %d to node %d", mv.key, mv.slot, mv.m.From.Node(mv.slot), mv.m.To.Node(mv.slot))
	}
	if errText != "" {
		errText = ": " + errText
	}
	h.logf("coordinator: wear move %d (%s) of %s %s (%s)%s", mv.id, mv.m.Reason, where, outcome, why, errText)
}

// record remembers a move's outcome. Called with h.mu held.
func (h *wearHost) record(mv *wearMove, outcome, why, errText string, now time.Time) {
	o := &coordpb.WearMoveOutcome{
		Id: mv.id, Key: mv.key, Slot: uint32(max(mv.slot, 0)), Bytes: mv.bytes, Reason: mv.m.Reason,
		Outcome: outcome, Error: errText, UnixMs: now.UnixMilli(), Why: why,
	}
	if mv.slot >= 0 {
		o.From, o.To = uint64(mv.m.From.Node(mv.slot)), uint64(mv.m.To.Node(mv.slot))
	}
	if len(h.recent) >= maxRecentMoves {
		h.recent = slices.Delete(h.recent, 0, len(h.recent)-maxRecentMoves+1)
	}
	h.recent = append(h.recent, o)
}

type wearPlan struct {
	plan wear.WritePlan
	at   time.Time
}

type wearMove struct {
	id       uint64
	m        wear.Move
	key      string
	slot     int
	bytes    int64
	version  uint64 // the version handed to the mover
	deadline time.Time
}

// hostPlacer walks the coordinator's ring by the object's key.
type hostPlacer struct{ h *wearHost }

func (p hostPlacer) Walk(id wear.ObjectID, visit func(base.NodeID) bool) {
	key, ok := p.h.keys[id]
	if !ok || p.h.ring == nil {
		return
	}
	for _, n := range p.h.ring.Walk(key) {
		if !visit(n) {
			return
		}
	}
}

func layoutOf(r objectpb.Redundancy, placement []uint64) (wear.Layout, error) {
	red := wear.REP
	if r == objectpb.Redundancy_EC {
		red = wear.EC
	}
	nodes := make([]base.NodeID, len(placement))
	for i, n := range placement {
		nodes[i] = base.NodeID(n)
	}
	return wear.NewLayout(red, nodes)
}

func redundancyOf(r wear.Redundancy) objectpb.Redundancy {
	if r == wear.EC {
		return objectpb.Redundancy_EC
	}
	return objectpb.Redundancy_REP
}

// startWear builds the balancer from the index and the persisted rows and
// starts its epoch loop.
func (c *Coordinator) startWear(ctx context.Context, loopCtx context.Context) error {
	wc := c.cfg.Wear
	if wc.Policy == "" {
		return nil
	}
	mode, err := wear.ParseMode(wc.Policy)
	if err != nil {
		return err
	}
	if mode == wear.ModeREPEC {
		return base.InvalidArgumentf("coordinator: wear policy rep+ec encodes in the background, which only the simulator runs (flashmend sim)")
	}
	opts := wc.Options
	opts.Mode = mode
	if wc.Redundancy != "" {
		if opts.Initial, err = wear.ParseRedundancy(wc.Redundancy); err != nil {
			return err
		}
	}
	if wc.Epoch <= 0 {
		wc.Epoch = time.Minute
	}
	if wc.MoveTimeout <= 0 {
		wc.MoveTimeout = 5 * time.Minute
	}
	h := &wearHost{cfg: wc, logf: c.cfg.Logf, keys: map[wear.ObjectID]string{}, plans: map[uint64]wearPlan{}, out: map[uint64]*wearMove{}, failedBy: map[string]int64{},
		unheard: map[uint64]int64{}}
	if h.b, err = wear.New(opts, hostPlacer{h}); err != nil {
		return err
	}
	if err := c.loadWear(ctx, h); err != nil {
		return err
	}
	c.wear = h
	c.wg.Add(1)
	go c.wearLoop(loopCtx)
	return nil
}

// loadWear restores every object from its record, then the rows that
// still agree with their record.
func (c *Coordinator) loadWear(ctx context.Context, h *wearHost) error {
	if err := c.refreshWearRing(ctx, h); err != nil {
		return err
	}
	layouts := map[wear.ObjectID]wear.Layout{}
	sizes := map[wear.ObjectID]int64{}
	from := objectsPrefix
	end := clientv3.GetPrefixRangeEnd(objectsPrefix)
	for {
		resp, err := c.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1000))
		if err != nil {
			return fmt.Errorf("coordinator: wear: %w", err)
		}
		for _, kv := range resp.Kvs {
			rec := &objectpb.ObjectRecord{}
			if err := decodeValue(string(kv.Key), kv.Value, rec); err != nil {
				c.cfg.Logf("coordinator: wear: %v (left out)", err)
				continue
			}
			l, err := layoutOf(rec.Redundancy, rec.Placement)
			if err != nil {
				c.cfg.Logf("coordinator: wear: %q: %v (left out)", rec.Key, err)
				continue
			}
			id := wear.ObjectID(rec.Object)
			h.keys[id] = rec.Key
			layouts[id], sizes[id] = l, rec.SizeBytes
			if err := h.b.Restore(wear.Entry{Object: id, State: wear.Stable(l.Redundancy), Dst: l}, rec.SizeBytes); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	rows, err := c.cli.Get(ctx, wearRowsPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("coordinator: wear: %w", err)
	}
	restored := 0
	for _, kv := range rows.Kvs {
		e, err := wear.DecodeEntry(kv.Value)
		if err != nil {
			c.cfg.Logf("coordinator: wear: row %s: %v (dropped)", kv.Key, err)
			continue
		}
		l, ok := layouts[e.Object]
		if !ok || e.Readable() != l {
			continue // stale: the record says otherwise
		}
		if err := h.b.Restore(e, sizes[e.Object]); err != nil {
			return err
		}
		restored++
	}
	h.b.Compact()
	c.cfg.Logf("coordinator: wear balancer %v: %d objects, %d rows restored", h.b.Options().Mode, h.b.Len(), restored)
	return nil
}

// refreshWearRing rebuilds the placement ring from the members.
func (c *Coordinator) refreshWearRing(ctx context.Context, h *wearHost) error {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	members := make([]base.NodeID, 0, len(nodes))
	for id := range nodes {
		members = append(members, base.NodeID(id))
	}
	slices.Sort(members)
	if h.ring == nil || !slices.Equal(h.ring.Nodes(), members) {
		h.ring = hashring.NewRing(members)
	}
	return nil
}

// wearPlace plans a put: the balancer's layout for the key, avoiding nodes
// that are down or excluded by the writer.
func (c *Coordinator) wearPlace(ctx context.Context, key string, exclude []uint64, nodes map[uint64]*coordpb.NodeInfo) (wear.WritePlan, error) {
	h := c.wear
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := c.refreshWearRing(ctx, h); err != nil {
		return wear.WritePlan{}, err
	}
	id := wear.ObjectID(hashring.KeyHash(key))
	if k, ok := h.keys[id]; ok && k != key {
		return wear.WritePlan{}, base.InvalidArgumentf("key %q collides with %q on its 64-bit object ID", key, k)
	}
	h.keys[id] = key
	plan, err := h.b.PlanWriteAvoiding(id, func(n base.NodeID) bool {
		info, ok := nodes[uint64(n)]
		return !ok || !info.GetLive() || slices.Contains(exclude, uint64(n))
	})
	if err != nil {
		if _, known := h.b.Entry(id); !known {
			delete(h.keys, id)
		}
		return wear.WritePlan{}, &unavailableError{err.Error()}
	}
	return plan, nil
}

func (h *wearHost) rememberPlan(version uint64, plan wear.WritePlan, now time.Time) {
	h.mu.Lock()
	h.plans[version] = wearPlan{plan: plan, at: now}
	h.mu.Unlock()
}

// checkCommit verifies that a commit writes what its BeginPut planned.
func (h *wearHost) checkCommit(version uint64, r objectpb.Redundancy, placement []uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.plans[version]
	if !ok {
		return &unavailableError{fmt.Sprintf("the wear plan of version %d is gone (the coordinator restarted); write again", version)}
	}
	l, err := layoutOf(r, placement)
	if err != nil || l != p.plan.New {
		return base.InvalidArgumentf("commit of version %d as %v %v differs from its plan %v", version, r, placement, p.plan.New)
	}
	return nil
}

// committed tells the balancer a put committed.
func (h *wearHost) committed(version uint64, size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.plans[version]
	if !ok {
		return
	}
	delete(h.plans, version)
	_ = h.b.Commit(p.plan, size, max(size, 1))
}

func (h *wearHost) dropPlan(version uint64) {
	h.mu.Lock()
	delete(h.plans, version)
	h.mu.Unlock()
}

// replaced tells the balancer a part moved: the wear move it was, or a
// re-protection.
func (h *wearHost) replaced(rec *objectpb.ObjectRecord, slot int, to uint64, now time.Time, logf func(string, ...any)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := wear.ObjectID(rec.Object)
	for mid, mv := range h.out {
		if mv.key == rec.Key && mv.slot == slot && uint64(mv.m.To.Node(slot)) == to {
			delete(h.out, mid)
			// The record switched to the destination: the part moved.
			// The balancer refuses it (ErrStaleMove) when the object's
			// row changed meanwhile (a write planned around the move):
			// Relocate below then takes the record's layout.
			h.done++
			h.movedBytes += mv.bytes
			if err := h.b.MoveDone(mv.m); err == nil {
				h.record(mv, moveDone, "", "", now)
				return
			}
			h.record(mv, moveDone, whyRowChanged, "", now)
			break
		}
	}
	l, err := layoutOf(rec.Redundancy, rec.Placement)
	if err != nil {
		logf("coordinator: wear: %q: %v", rec.Key, err)
		return
	}
	_ = h.b.Relocate(id, l)
}

func (h *wearHost) removed(object uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := wear.ObjectID(object)
	h.b.Remove(id)
	delete(h.keys, id)
}

// wearLoop ends an epoch every Epoch.
func (c *Coordinator) wearLoop(ctx context.Context) {
	defer c.wg.Done()
	tick, stop := base.NewTicker(c.cfg.Clock, c.wear.cfg.Epoch)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if err := c.wearEpoch(ctx, nil); err != nil && ctx.Err() == nil {
				c.cfg.Logf("coordinator: wear epoch: %v", err)
			}
		}
	}
}

// WearEpoch ends a wear epoch now (the loop also ends one every
// WearConfig.Epoch): the flash monitor's statistics from the nodes'
// heartbeats, or stats when given (tests and experiments that script the
// wear), the balancer's decisions, the rows it changed persisted, its
// moves queued for a mover.
func (c *Coordinator) WearEpoch(ctx context.Context, stats []wear.ServerStats) error {
	if c.wear == nil {
		return base.InvalidArgumentf("coordinator: the wear balancer is off")
	}
	return c.wearEpoch(ctx, stats)
}

func (c *Coordinator) wearEpoch(ctx context.Context, stats []wear.ServerStats) error {
	h := c.wear
	nodes, err := c.readNodes(ctx)
	if err != nil {
		return err
	}
	if stats == nil {
		for _, n := range nodes {
			util := 0.0
			if n.CapacityBytes > 0 {
				util = math.Min(1, float64(n.UsedBytes)/float64(n.CapacityBytes))
			}
			stats = append(stats, wear.ServerStats{
				Node: base.NodeID(n.Id), Up: n.Live, Erases: float64(n.EraseCountTotal),
				Utilization: util, CapacityBytes: n.CapacityBytes,
			})
		}
		slices.SortFunc(stats, func(a, b wear.ServerStats) int { return int(a.Node) - int(b.Node) })
	} else {
		stats = slices.Clone(stats)
	}
	now := c.cfg.Clock.Now()
	h.mu.Lock()
	for i := range stats {
		id := uint64(stats[i].Node)
		heard, ok := h.unheard[id]
		if !ok {
			continue
		}
		if n := nodes[id]; n == nil || !n.Live || n.HeartbeatUnixMs > heard {
			delete(h.unheard, id) // down by its lease now, or heard from since
			continue
		}
		stats[i].Up = false
	}
	if err := c.refreshWearRing(ctx, h); err != nil {
		h.mu.Unlock()
		return err
	}
	ops := h.rowOps()
	d, err := h.b.Epoch(stats)
	if err != nil {
		h.mu.Unlock()
		return err
	}
	h.last = d
	ops = append(ops, h.rowOps()...)
	for _, m := range d.Moves {
		h.queue(m, now)
	}
	for id, mv := range h.out {
		if now.After(mv.deadline) {
			delete(h.out, id)
			h.finish(mv, h.b.Superseded(mv.m), moveTimedOut, whyTimedOut, "", now)
			h.b.MoveFailed(mv.m)
		}
	}
	for v, p := range h.plans {
		if now.Sub(p.at) > c.cfg.PendingTimeout {
			delete(h.plans, v)
		}
	}
	h.mu.Unlock()
	ops = lastOpPerKey(ops)
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := c.cli.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return fmt.Errorf("persisting wear rows: %w", err)
		}
		ops = ops[n:]
	}
	if d.ARPT || d.HCDS || d.EDM || len(d.Moves) > 0 {
		c.cfg.Logf("coordinator: wear epoch %d: erase sigma %.1f mean %.1f, %d rows changed, %d moves", d.Epoch, d.Sigma, d.Mean, len(d.Changed), len(d.Moves))
	}
	return nil
}

// lastOpPerKey keeps the last operation on each key (etcd refuses a
// transaction that names a key twice), in order.
func lastOpPerKey(ops []clientv3.Op) []clientv3.Op {
	last := map[string]int{}
	for i, op := range ops {
		last[string(op.KeyBytes())] = i
	}
	var out []clientv3.Op
	for i, op := range ops {
		if last[string(op.KeyBytes())] == i {
			out = append(out, op)
		}
	}
	return out
}

// rowOps turns the balancer's epoch log into etcd writes (the latest row
// per object; a default or removed row is deleted) and folds the log.
// Called with h.mu held.
func (h *wearHost) rowOps() []clientv3.Op {
	latest := map[wear.ObjectID]wear.LogRecord{}
	var order []wear.ObjectID
	for _, r := range h.b.Table().Log() {
		if _, ok := latest[r.Entry.Object]; !ok {
			order = append(order, r.Entry.Object)
		}
		latest[r.Entry.Object] = r
	}
	var ops []clientv3.Op
	for _, id := range order {
		r := latest[id]
		key, ok := h.keys[id]
		if !ok {
			continue
		}
		if r.Deleted || h.b.IsDefault(r.Entry) {
			ops = append(ops, clientv3.OpDelete(wearRowsPrefix+key))
			continue
		}
		ops = append(ops, clientv3.OpPut(wearRowsPrefix+key, string(r.Entry.AppendBinary(nil))))
	}
	h.b.Compact()
	return ops
}

// queue turns a balancer move into a part replacement for a mover. Only
// moves of one part within one redundancy are made live; others fail.
// Called with h.mu held.
func (h *wearHost) queue(m wear.Move, now time.Time) {
	slot := -1
	ok := m.From.Redundancy == m.To.Redundancy
	for p := 0; ok && p < m.To.Width(); p++ {
		if m.From.Node(p) != m.To.Node(p) {
			if slot >= 0 {
				ok = false
			}
			slot = p
		}
	}
	key, known := h.keys[m.Object]
	if !ok || slot < 0 || !known {
		h.nextID++
		h.finish(&wearMove{id: h.nextID, m: m, key: key, slot: -1, bytes: m.Bytes}, false, moveFailed, whyNotSinglePart, "", now)
		h.b.MoveFailed(m)
		return
	}
	h.nextID++
	h.queued = append(h.queued, &wearMove{id: h.nextID, m: m, key: key, slot: slot, bytes: m.Bytes})
}

// WearMoves hands queued moves to a mover.
func (c *Coordinator) WearMoves(ctx context.Context, req *coordpb.WearMovesRequest) (*coordpb.WearMovesResponse, error) {
	h := c.wear
	if h == nil {
		return &coordpb.WearMovesResponse{}, nil
	}
	limit := int(req.Limit)
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	h.mu.Lock()
	take := h.queued[:min(limit, len(h.queued))]
	h.queued = h.queued[len(take):]
	h.mu.Unlock()
	resp := &coordpb.WearMovesResponse{}
	now := c.cfg.Clock.Now()
	for _, mv := range take {
		rec, _, err := c.lookup(ctx, mv.key)
		var l wear.Layout
		if err == nil {
			l, err = layoutOf(rec.Redundancy, rec.Placement)
		}
		h.mu.Lock()
		if err != nil || l != mv.m.From {
			// The object changed since the epoch decided: a put of a newer
			// version (in an EWO state it wrote the part to its
			// destination itself), a removal or a re-protection. The
			// balancer's row says which: if it did not change, the record
			// and the row disagree, which is a failure.
			superseded, why, errText := h.b.Superseded(mv.m), whyRowChanged, ""
			switch {
			case isNotFound(err):
				superseded, why = true, whyRemoved
			case err != nil:
				why, errText = whyLookup, err.Error()
			case !superseded:
				why, errText = whyRowOutOfDate, fmt.Sprintf("record %v, move from %v", l, mv.m.From)
			}
			h.finish(mv, superseded, moveFailed, why, errText, now)
			h.b.MoveFailed(mv.m)
			h.mu.Unlock()
			continue
		}
		mv.version = rec.Version
		mv.deadline = now.Add(h.cfg.MoveTimeout)
		h.out[mv.id] = mv
		h.mu.Unlock()
		resp.Moves = append(resp.Moves, &coordpb.WearMove{
			Id: mv.id, Key: mv.key, Version: rec.Version, Slot: uint32(mv.slot),
			From: uint64(mv.m.From.Node(mv.slot)), To: uint64(mv.m.To.Node(mv.slot)), Bytes: mv.bytes, Reason: mv.m.Reason,
		})
	}
	return resp, nil
}

// WearMoveDone records a mover's outcome. A move that committed was already
// recorded by CommitReplace; one that failed goes back to the balancer.
func (c *Coordinator) WearMoveDone(ctx context.Context, req *coordpb.WearMoveDoneRequest) (*coordpb.WearMoveDoneResponse, error) {
	h := c.wear
	if h == nil {
		return &coordpb.WearMoveDoneResponse{}, nil
	}
	h.mu.Lock()
	mv, ok := h.out[req.Id]
	if !ok {
		h.mu.Unlock()
		return &coordpb.WearMoveDoneResponse{}, nil
	}
	delete(h.out, req.Id)
	if req.Ok {
		defer h.mu.Unlock()
		// CommitReplace did not see it (a mover that reports success must
		// have committed): count it as done on the balancer's side too.
		if err := h.b.MoveDone(mv.m); err == nil {
			h.done++
			h.movedBytes += mv.bytes
			h.record(mv, moveDone, "", "", c.cfg.Clock.Now())
			return &coordpb.WearMoveDoneResponse{}, nil
		}
		h.finish(mv, true, moveFailed, whyRowChanged, "reported done, row changed", c.cfg.Clock.Now())
		h.b.MoveFailed(mv.m)
		return &coordpb.WearMoveDoneResponse{}, nil
	}
	h.mu.Unlock()
	superseded, why, heard := c.moveFailureWhy(ctx, mv, req.Error)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !superseded && h.b.Superseded(mv.m) {
		superseded, why = true, whyRowChanged
	}
	if !superseded && (why == whyCopyFailed || why == whyDestinationDown) && heard >= 0 {
		h.unheard[uint64(mv.m.To.Node(mv.slot))] = heard
	}
	h.finish(mv, superseded, moveFailed, why, req.Error, c.cfg.Clock.Now())
	h.b.MoveFailed(mv.m)
	return &coordpb.WearMoveDoneResponse{}, nil
}

// moveFailureWhy classifies a move its mover reported failed: superseded
// when the object's current version is not the one the mover moved (or the
// object is gone); otherwise a node down (the destination, or one holding a
// part the copy reads), else the step the mover's error names. heard is
// the destination's latest heartbeat time as etcd holds it now (-1 when it
// could not be read). Called without h.mu held (it reads etcd).
func (c *Coordinator) moveFailureWhy(ctx context.Context, mv *wearMove, errText string) (superseded bool, why string, heard int64) {
	heard = -1
	rec, _, err := c.lookup(ctx, mv.key)
	switch {
	case isNotFound(err):
		return true, whyRemoved, heard
	case err == nil && rec.Version != mv.version:
		return true, whyNewerVersion, heard
	}
	// NB: read, not the cached view: the heartbeat must be the latest.
	if nodes, err := c.readNodes(ctx); err == nil {
		n := nodes[uint64(mv.m.To.Node(mv.slot))]
		if n != nil {
			heard = n.HeartbeatUnixMs
		}
		if n == nil || !n.Live {
			return false, whyDestinationDown, heard
		}
		if rec != nil {
			for _, id := range rec.Placement {
				if n := nodes[id]; n == nil || !n.Live {
					return false, whyPartDown, heard
				}
			}
		}
	}
	switch {
	case strings.HasPrefix(errText, "stale:"):
		return true, whyNewerVersion, heard
	case strings.HasPrefix(errText, "begin:") && strings.Contains(errText, "is not live"):
		return false, whyDestinationDown, heard
	case strings.HasPrefix(errText, "begin:") && strings.Contains(errText, "garbage or a pending part"):
		return false, whyDestinationBusy, heard
	case strings.HasPrefix(errText, "begin:"):
		return false, whyBeginRefused, heard
	case strings.HasPrefix(errText, "copy to node"):
		return false, whyCopyFailed, heard
	case strings.HasPrefix(errText, "commit:"):
		return false, whyCommitRefused, heard
	}
	return false, whyMoverError, heard
}

// WearStatus reports the balancer's state for `flashmend ctl wear`.
func (c *Coordinator) WearStatus(ctx context.Context, req *coordpb.WearStatusRequest) (*coordpb.WearStatusResponse, error) {
	h := c.wear
	if h == nil {
		return &coordpb.WearStatusResponse{}, nil
	}
	nodes, err := c.readNodes(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	opts := h.b.Options()
	resp := &coordpb.WearStatusResponse{
		Policy: opts.Mode.String(), InitialRedundancy: strings.ToLower(opts.Initial.String()),
		Epoch: h.b.CurrentEpoch(), EpochMillis: h.cfg.Epoch.Milliseconds(),
		MovesPending: int64(len(h.queued) + len(h.out)), MovesDone: h.done, MovesFailed: h.failed,
		MovesSuperseded: h.superseded,
		BytesMoved:      h.movedBytes, MappingRows: int64(h.b.Table().Rows()),
		Arpt: h.last.ARPT, Hcds: h.last.HCDS, Edm: h.last.EDM,
	}
	for why, n := range h.failedBy {
		resp.MovesFailedByReason = append(resp.MovesFailedByReason, &coordpb.WearMoveCount{Reason: why, Moves: n})
	}
	slices.SortFunc(resp.MovesFailedByReason, func(a, b *coordpb.WearMoveCount) int { return strings.Compare(a.Reason, b.Reason) })
	for _, o := range h.recent {
		resp.RecentMoves = append(resp.RecentMoves, proto.Clone(o).(*coordpb.WearMoveOutcome))
	}
	var sum, sumSq, n float64
	for _, info := range nodes {
		_, rate, _ := h.b.Server(base.NodeID(info.Id))
		util := 0.0
		if info.CapacityBytes > 0 {
			util = float64(info.UsedBytes) / float64(info.CapacityBytes)
		}
		resp.Nodes = append(resp.Nodes, &coordpb.WearNode{Id: info.Id, Live: info.Live, Erases: info.EraseCountTotal, EraseRate: rate, Utilization: util})
		if info.Live {
			e := float64(info.EraseCountTotal)
			sum, sumSq, n = sum+e, sumSq+e*e, n+1
		}
	}
	slices.SortFunc(resp.Nodes, func(a, b *coordpb.WearNode) int { return int(a.Id) - int(b.Id) })
	if n > 0 {
		resp.EraseMean = sum / n
		resp.EraseSigma = math.Sqrt(math.Max(0, sumSq/n-resp.EraseMean*resp.EraseMean))
	}
	mix := h.b.Mix()
	for _, st := range wear.States() {
		o, b := mix.Of(st)
		resp.States = append(resp.States, &coordpb.WearStateCount{State: st.String(), Objects: o, Bytes: b})
	}
	return resp, nil
}

// beginWearReplace is BeginReplace for a wear move: the destination is the
// balancer's (req.To), which must be live and hold no part of the version;
// the source may be live (it keeps serving until CommitReplace).
func (c *Coordinator) beginWearReplace(ctx context.Context, rec *objectpb.ObjectRecord, req *coordpb.BeginReplaceRequest, nodes map[uint64]*coordpb.NodeInfo) (*coordpb.BeginReplaceResponse, error) {
	target, ok := nodes[req.To]
	if !ok || !target.GetLive() {
		return nil, rpcErr(&unavailableError{fmt.Sprintf("wear move in %q v%d: node %d is not live", req.Key, req.Version, req.To)})
	}
	busy, asOf, err := c.replaceBusy(ctx, rec, req.Slot)
	if err != nil {
		return nil, rpcErr(err)
	}
	if slices.Contains(rec.Placement, req.To) {
		return nil, rpcErr(base.InvalidArgumentf("wear move in %q v%d: node %d already holds a part (placement %v)", req.Key, req.Version, req.To, rec.Placement))
	}
	if busy[req.To] {
		// Its garbage of this version (a part moved away, a retired
		// attempt) or another slot's replacement is there: the sweeper
		// deletes a version's blob on a node whole.
		return nil, rpcErr(&unavailableError{fmt.Sprintf("wear move in %q v%d: node %d still holds garbage or a pending part of this version; later", req.Key, req.Version, req.To)})
	}
	if err := c.putReplacePending(ctx, rec, req.Slot, target.Id, asOf); err != nil {
		return nil, rpcErr(err)
	}
	return &coordpb.BeginReplaceResponse{Target: target}, nil
}

// WearEntry returns the balancer's row for a key (tests and tools).
func (c *Coordinator) WearEntry(key string) (wear.Entry, bool) {
	if c.wear == nil {
		return wear.Entry{}, false
	}
	c.wear.mu.Lock()
	defer c.wear.mu.Unlock()
	return c.wear.b.Entry(wear.ObjectID(hashring.KeyHash(key)))
}
