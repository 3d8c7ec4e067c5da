package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/objlayout"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// ScrubObject verifies every replica (REP) or every shard including parity
// (EC) of every chunk of a version and repairs what is corrupt, through the
// same decision cores as reads. wait, when set, is called before each chunk
// with the bytes about to be read (the scrubber's budget); queue, when set,
// takes the repairs.
func (c *Client) ScrubObject(ctx context.Context, rec *objectpb.ObjectRecord, wait func(ctx context.Context, bytes int64) error, queue func(RepairJob)) (*ReadReport, error) {
	l, err := objlayout.New(rec)
	if err != nil {
		return nil, err
	}
	rep := &report{ReadReport: ReadReport{Mode: "scrub", Chunks: l.Chunks, RepairsByNode: map[uint64]int{}}, queue: queue}
	for i := 0; i < l.Chunks; i++ {
		if wait != nil {
			if err := wait(ctx, int64(l.ChunkLen(i))*int64(l.Copies)); err != nil {
				return &rep.ReadReport, err
			}
		}
		if l.EC {
			_, _, err = c.readRowEC(ctx, l, i, rep, true, nil)
		} else {
			_, _, err = c.readChunkREP(ctx, l, i, rep, true, nil)
		}
		if err != nil {
			return &rep.ReadReport, fmt.Errorf("scrub %q v%d chunk %d: %w", rec.Key, rec.Version, i, err)
		}
	}
	return &rep.ReadReport, nil
}

// ScrubberOptions configures a Scrubber.
type ScrubberOptions struct {
	// ScrubBytesPerSecond bounds verification reads (default 64 MiB/s).
	ScrubBytesPerSecond base.Bytes
	// RepairBytesPerSecond bounds repair writes (default 16 MiB/s).
	RepairBytesPerSecond base.Bytes
	// RepairQueue bounds queued repairs; a full queue stalls the scan
	// (default 1024).
	RepairQueue int
	// Pause between full passes (default 1 minute).
	PassInterval time.Duration
	// ReprotectAfter is how long a node must have been down (as this
	// scrubber saw it) before its replicas and shards are re-created on
	// other nodes (default 10 minutes; negative: never).
	ReprotectAfter time.Duration
	// DieRepairPoll is how often Run asks the nodes for die-repair jobs
	// (RepairDies; default 500ms, negative: never).
	DieRepairPoll time.Duration
	Clock         base.Clock
	// Sleep waits (injected for tests; default: d on Clock, honoring ctx).
	Sleep func(ctx context.Context, d time.Duration) error
}

// ScrubStats are a scrubber's counters.
type ScrubStats struct {
	Passes, Objects, Chunks int64
	BytesVerified           int64
	RepairsQueued           int64
	// Reprotected counts replicas or shards of dead nodes re-created on
	// other nodes (ReprotectAfter); ReprotectFailed the attempts that
	// failed (retried next pass).
	Reprotected, ReprotectFailed int64
	Repaired, RepairFailed       int64
	// RepairedMissing counts repairs that re-created missing chunks (also
	// in Repaired).
	RepairedMissing int64
	// RepairsPending is how many failed repairs wait to be tried again
	// (at the start of each pass, while their version is current);
	// RepairRetried counts the ones a retry wrote; RepairFailedNoSpace the
	// failures (in RepairFailed) whose node was full. LastRepairFailure is
	// the last failure's reason.
	RepairsPending      int64
	RepairRetried       int64
	RepairFailedNoSpace int64
	LastRepairFailure   string
	Errors              int64
	// PassObjects is the number of objects of the current (or last) pass;
	// PassObjectsDone how many of them it has verified: its progress.
	PassObjects, PassObjectsDone int64
}

func (s ScrubStats) String() string {
	out := fmt.Sprintf("passes=%d objects=%d chunks=%d verified=%dB repaired=%d/%d failed=%d errors=%d reprotected=%d",
		s.Passes, s.Objects, s.Chunks, s.BytesVerified, s.Repaired, s.RepairsQueued, s.RepairFailed, s.Errors, s.Reprotected)
	if s.RepairFailed > 0 {
		out += fmt.Sprintf(" (no space %d, pending %d, retried %d; last: %s)", s.RepairFailedNoSpace, s.RepairsPending, s.RepairRetried, s.LastRepairFailure)
	}
	return out
}

// Scrubber verifies the whole index in the background at a bounded rate and
// repairs through a queue drained at its own bounded rate, so a burst of
// failures (a power loss, a failing device) queues instead of becoming a
// repair storm.
type Scrubber struct {
	c      *Client
	opts   ScrubberOptions
	scrub  *direct.TokenBucket
	repair *direct.TokenBucket
	jobs   chan RepairJob
	mu     sync.Mutex
	stats  ScrubStats
	// downSince is when each member was first seen down (guarded by mu).
	downSince map[uint64]time.Time
	// failed holds the repairs that could not be written, to be tried
	// again (guarded by mu; at most RepairQueue, the newest per chunk and
	// node kept).
	failed map[repairKey]RepairJob
}

type repairKey struct {
	node uint64
	id   direct.ChunkID
}

// NewScrubber returns a scrubber over c's cluster.
func NewScrubber(c *Client, opts ScrubberOptions) (*Scrubber, error) {
	if opts.ScrubBytesPerSecond == 0 {
		opts.ScrubBytesPerSecond = 64 * base.MiB
	}
	if opts.RepairBytesPerSecond == 0 {
		opts.RepairBytesPerSecond = 16 * base.MiB
	}
	if opts.RepairQueue == 0 {
		opts.RepairQueue = 1024
	}
	if opts.RepairQueue < 0 || opts.ScrubBytesPerSecond < 0 || opts.RepairBytesPerSecond < 0 {
		return nil, base.InvalidArgumentf("scrubber: negative option")
	}
	if opts.PassInterval <= 0 {
		opts.PassInterval = time.Minute
	}
	if opts.ReprotectAfter == 0 {
		opts.ReprotectAfter = 10 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = base.SystemClock{}
	}
	if opts.DieRepairPoll == 0 {
		opts.DieRepairPoll = 500 * time.Millisecond
	}
	if opts.Sleep == nil {
		opts.Sleep = func(ctx context.Context, d time.Duration) error {
			select {
			case <-base.After(opts.Clock, d):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	now := opts.Clock.Now()
	// Bursts of one EC row (6 x 64 KiB) or a few repairs.
	sb, err := direct.NewTokenBucket(opts.ScrubBytesPerSecond, 6*direct.ChunkSize, now)
	if err != nil {
		return nil, err
	}
	rb, err := direct.NewTokenBucket(opts.RepairBytesPerSecond, 4*direct.ChunkSize, now)
	if err != nil {
		return nil, err
	}
	return &Scrubber{c: c, opts: opts, scrub: sb, repair: rb, jobs: make(chan RepairJob, opts.RepairQueue),
		downSince: map[uint64]time.Time{}, failed: map[repairKey]RepairJob{}}, nil
}

// Stats returns the counters.
func (s *Scrubber) Stats() ScrubStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Scrubber) count(f func(*ScrubStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// Run scrubs pass after pass until ctx ends.
func (s *Scrubber) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.drain(ctx)
	}()
	if s.opts.DieRepairPoll > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runDieRepairs(ctx, s.opts.DieRepairPoll)
		}()
	}
	defer wg.Wait()
	for {
		if err := s.Pass(ctx); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.opts.Sleep(ctx, s.opts.PassInterval); err != nil {
			return err
		}
	}
}

// Pass scrubs every object once. Repairs are queued; run Drain (or Run) to
// apply them.
func (s *Scrubber) Pass(ctx context.Context) error {
	recs, err := s.c.List(ctx, "")
	if err != nil {
		return err
	}
	dead, err := s.deadNodes(ctx)
	if err != nil {
		return err
	}
	s.retryFailed(ctx, recs)
	s.count(func(st *ScrubStats) { st.PassObjects, st.PassObjectsDone = int64(len(recs)), 0 })
	for _, rec := range recs {
		if slices.ContainsFunc(rec.Placement, dead) {
			rp, err := s.c.ReprotectObject(ctx, rec, dead, s.wait)
			s.count(func(st *ScrubStats) {
				st.Objects++
				st.PassObjectsDone++
				st.Reprotected += int64(rp.Moved)
				if err != nil {
					st.ReprotectFailed++
				}
			})
			if err != nil {
				s.c.opts.Logf("scrubber: %v", err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		rep, err := s.c.ScrubObject(ctx, rec, s.wait, s.enqueue(ctx))
		s.count(func(st *ScrubStats) {
			st.Objects++
			st.PassObjectsDone++
			if rep != nil {
				st.Chunks += int64(rep.Chunks)
				st.BytesVerified += rep.BytesRead
			}
			if err != nil {
				st.Errors++
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	s.count(func(st *ScrubStats) { st.Passes++ })
	return nil
}

// deadNodes updates when each member was first seen down and returns the
// test for "down for at least ReprotectAfter" (a node the membership does
// not know counts as down).
func (s *Scrubber) deadNodes(ctx context.Context) (func(uint64) bool, error) {
	nodes, err := s.c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	live := map[uint64]bool{}
	for _, n := range nodes {
		live[n.Id] = n.Live
		if n.Live {
			delete(s.downSince, n.Id)
		} else if _, ok := s.downSince[n.Id]; !ok {
			s.downSince[n.Id] = now
		}
	}
	after := s.opts.ReprotectAfter
	return func(id uint64) bool {
		if after < 0 || live[id] {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		since, ok := s.downSince[id]
		if !ok {
			s.downSince[id] = now
			since = now
		}
		return now.Sub(since) >= after
	}, nil
}

// wait waits for n bytes of the scrub budget.
func (s *Scrubber) wait(ctx context.Context, n int64) error { return s.reserve(ctx, s.scrub, n) }

// reserve waits until budget b (a TokenBucket under s.mu) allows n bytes.
func (s *Scrubber) reserve(ctx context.Context, b *direct.TokenBucket, n int64) error {
	s.mu.Lock()
	d := b.Reserve(n, s.opts.Clock.Now())
	s.mu.Unlock()
	if d > 0 {
		return s.opts.Sleep(ctx, d)
	}
	return nil
}

func (s *Scrubber) enqueue(ctx context.Context) func(RepairJob) {
	return func(j RepairJob) {
		s.count(func(st *ScrubStats) { st.RepairsQueued++ })
		select {
		case s.jobs <- j:
		case <-ctx.Done():
		}
	}
}

// Drain applies queued repairs within the repair budget until the queue is
// empty.
func (s *Scrubber) Drain(ctx context.Context) {
	for {
		select {
		case j := <-s.jobs:
			s.apply(ctx, j)
		default:
			return
		}
	}
}

func (s *Scrubber) drain(ctx context.Context) {
	for {
		select {
		case j := <-s.jobs:
			s.apply(ctx, j)
		case <-ctx.Done():
			return
		}
	}
}

func (s *Scrubber) apply(ctx context.Context, j RepairJob) { _ = s.applyNow(ctx, j) }

// applyNow applies one repair within the repair budget and counts it.
func (s *Scrubber) applyNow(ctx context.Context, j RepairJob) error {
	s.mu.Lock()
	d := s.repair.Reserve(int64(len(j.Data)), s.opts.Clock.Now())
	s.mu.Unlock()
	if d > 0 {
		if err := s.opts.Sleep(ctx, d); err != nil {
			return err
		}
	}
	err := s.c.applyRepair(ctx, j)
	k := repairKey{j.Node, j.ID}
	s.count(func(st *ScrubStats) {
		if err != nil {
			if ctx.Err() != nil {
				return // stopping: not a failure of the repair
			}
			st.RepairFailed++
			if base.IsNoSpace(err) {
				st.RepairFailedNoSpace++
			}
			st.LastRepairFailure = err.Error()
			if _, ok := s.failed[k]; ok || len(s.failed) < s.opts.RepairQueue {
				s.failed[k] = j
			}
		} else {
			st.Repaired++
			if j.Missing {
				st.RepairedMissing++
			}
			delete(s.failed, k)
		}
		st.RepairsPending = int64(len(s.failed))
	})
	if err != nil && ctx.Err() == nil {
		s.c.opts.Logf("scrubber: repair of %s on node %d failed (tried again next pass): %v", j.ID, j.Node, err)
	}
	return err
}

// retryFailed tries the repairs that failed again, within the repair
// budget: a full node may have room now (objects deleted, its GC ran). A
// repair whose version recs (the index) no longer lists is dropped.
func (s *Scrubber) retryFailed(ctx context.Context, recs []*objectpb.ObjectRecord) {
	type version struct{ object, version uint64 }
	current := map[version]bool{}
	for _, r := range recs {
		current[version{r.Object, r.Version}] = true
	}
	s.mu.Lock()
	var jobs []RepairJob
	for k, j := range s.failed {
		if current[version{j.ID.Object, j.ID.Version}] {
			jobs = append(jobs, j)
		} else {
			delete(s.failed, k)
		}
	}
	s.stats.RepairsPending = int64(len(s.failed))
	s.mu.Unlock()
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		if err := s.applyNow(ctx, j); err == nil {
			s.count(func(st *ScrubStats) { st.RepairRetried++ })
		}
	}
}
