package raftnode

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/raftlog"
	"github.com/flashmend/flashmend/internal/testseed"
)

// gateFS is a file system whose files under dir can be made to hold every
// Sync at a gate, and that records the largest single Write to them.
type gateFS struct {
	vfs.FS
	dir string

	mu       sync.Mutex
	gate     chan struct{} // nil: syncs pass
	entered  chan struct{} // signalled when a sync waits at the gate
	maxWrite int
}

func (g *gateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	if err != nil {
		return f, err
	}
	return &gateFile{File: f, fs: g, name: name}, nil
}

type gateFile struct {
	vfs.File
	fs   *gateFS
	name string
}

// watched reports whether the file is under the gated directory.
func (f *gateFile) watched() bool { return f.fs.dir != "" && strings.HasPrefix(f.name, f.fs.dir+"/") }

func (f *gateFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	if f.watched() {
		f.fs.maxWrite = max(f.fs.maxWrite, len(p))
	}
	f.fs.mu.Unlock()
	return f.File.Write(p)
}

func (f *gateFile) Sync() error {
	f.fs.mu.Lock()
	var gate chan struct{}
	if f.watched() {
		gate = f.fs.gate
	}
	f.fs.mu.Unlock()
	if gate != nil {
		select {
		case f.fs.entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return f.File.Sync()
}

// newGateGroup is newGroup with the raft logs on a gateFS, every node
// taking at most batch proposals and messages per Ready.
func newGateGroup(t *testing.T, batch int) (*group, *gateFS) {
	gfs := &gateFS{FS: vfs.NewMem(), entered: make(chan struct{}, 1)}
	return newGroupOn(t, gfs, batch), gfs
}

func (g *group) appliedEverywhere(n int) bool {
	for _, h := range g.hosts {
		h.mu.Lock()
		k := len(h.applied)
		h.mu.Unlock()
		if k < n {
			return false
		}
	}
	return true
}

// TestGroupCommit holds the leader's raft log sync while one proposal is
// being persisted and queues more meanwhile: with group commit the next
// Ready carries all of them in one log write (one sync per copy); with
// MaxBatch 1 every proposal has a write of its own. Either way every
// proposal is applied once, in order, on every member.
func TestGroupCommit(t *testing.T) {
	const k = 64
	for _, batch := range []int{0, 1} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			g, gfs := newGateGroup(t, batch)
			g.until("leader", func() bool { return g.leader() != 0 })
			// The clock stands still from here on: no election moves
			// leadership away while the leader's log syncs are held.
			lead := g.leader()
			ctx := context.Background()
			data := func(i int) string { return fmt.Sprintf("op-%03d-%s", i, strings.Repeat("v", 100)) }
			gate := make(chan struct{})
			gfs.mu.Lock()
			gfs.gate = gate
			gfs.dir = fmt.Sprintf("r%d", lead)
			gfs.maxWrite = 0
			gfs.mu.Unlock()
			if err := g.nodes[lead].Propose(ctx, 1, []byte(data(0))); err != nil {
				t.Fatal(err)
			}
			<-gfs.entered // the loop persists the first proposal's Ready
			for i := 1; i < k; i++ {
				if err := g.nodes[lead].Propose(ctx, uint64(i+1), []byte(data(i))); err != nil {
					t.Fatal(err)
				}
			}
			gfs.mu.Lock()
			gfs.gate = nil
			gfs.mu.Unlock()
			close(gate)
			g.until("every proposal applied everywhere", func() bool { return g.appliedEverywhere(k) })
			for id, h := range g.hosts {
				h.mu.Lock()
				got := append([]string(nil), h.applied...)
				h.mu.Unlock()
				if len(got) != k {
					t.Fatalf("r%d applied %d entries, want %d", id, len(got), k)
				}
				for i, d := range got {
					if d != data(i) {
						t.Fatalf("r%d applied %q at %d, want %q", id, d[:7], i, data(i)[:7])
					}
				}
			}
			gfs.mu.Lock()
			maxWrite := gfs.maxWrite
			gfs.mu.Unlock()
			batched := maxWrite >= (k-1)*len(data(0))
			if batched != (batch == 0) {
				t.Fatalf("batch %d: largest raft log write %d B for entries of %d B: batched %t", batch, maxWrite, len(data(0)), batched)
			}
		})
	}
}

// lossyHost is a host whose transport drops a seeded share of messages.
type lossyHost struct {
	*host
	mu   *sync.Mutex
	rng  *rand.Rand
	loss *float64
}

func (h lossyHost) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		h.mu.Lock()
		drop := h.rng.Float64() < *h.loss
		h.mu.Unlock()
		if drop {
			continue
		}
		if to, ok := h.g.nodes[m.GetTo()]; ok {
			to.Step(proto.Clone(m).(*pb.Message))
		}
	}
}

// TestGroupCommitUnderLoss: proposals from many goroutines, batched, while
// the transport drops messages and leadership moves: every member applies
// the same entries in the same order and none twice (a batch is entries,
// each applied on its own); once the faults stop, a last proposal on the
// leader is applied everywhere.
func TestGroupCommitUnderLoss(t *testing.T) {
	rng := testseed.Rand(t, "RAFTNODE_SEED")
	g := &group{t: t, clock: base.NewManualClock(time.Unix(1_700_000_000, 0)),
		nodes: map[uint64]*Node{}, hosts: map[uint64]*host{}, stop: make(chan struct{})}
	var mu sync.Mutex
	loss := 0.1
	fs := vfs.NewMem()
	for id := uint64(1); id <= 3; id++ {
		lg, err := raftlog.Open(raftlog.Options{FS: fs, Dir: fmt.Sprintf("r%d", id)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lg.Close() })
		if err := lg.Bootstrap([]uint64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		h := &host{g: g, id: id}
		g.hosts[id] = h
		lh := lossyHost{host: h, mu: &mu, rng: rand.New(rand.NewSource(rng.Int63())), loss: &loss}
		g.nodes[id] = New(Config{ID: id, Log: lg, ElectionTicks: 10, HeartbeatTicks: 1,
			TickInterval: 10 * time.Millisecond, Clock: g.clock, Host: lh, Stop: g.stop})
	}
	g.start(t)
	g.until("leader", func() bool { return g.leader() != 0 })
	ctx := context.Background()
	var wg sync.WaitGroup
	const writers, each = 8, 40
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				lead := g.leader()
				if lead == 0 {
					lead = uint64(1 + (w+i)%3)
				}
				_ = g.nodes[lead].Propose(ctx, uint64(w*1000+i), []byte(fmt.Sprintf("w%d-%d", w, i)))
				if i%10 == 9 && w == 0 {
					g.nodes[lead].TransferLeadership()
				}
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	g.until("writers done", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	mu.Lock()
	loss = 0
	mu.Unlock()
	tries := 0
	g.until("a last proposal applied everywhere", func() bool {
		// Proposed again every 20 ticks: a proposal raft refused, or that
		// a deposed leader held, is gone.
		if lead := g.leader(); lead != 0 && tries%20 == 0 {
			_ = g.nodes[lead].Propose(ctx, 999_999, []byte("last"))
		}
		tries++
		for _, h := range g.hosts {
			h.mu.Lock()
			n := len(h.applied)
			ok := n > 0 && h.applied[n-1] == "last"
			h.mu.Unlock()
			if !ok {
				return false
			}
		}
		return true
	})
	var ref []string
	for id := uint64(1); id <= 3; id++ {
		h := g.hosts[id]
		h.mu.Lock()
		got := append([]string(nil), h.applied...)
		h.mu.Unlock()
		seen := map[string]bool{}
		for _, d := range got {
			if seen[d] && d != "last" {
				t.Fatalf("r%d applied %s twice", id, d)
			}
			seen[d] = true
		}
		n := min(len(ref), len(got))
		if ref != nil && fmt.Sprint(ref[:n]) != fmt.Sprint(got[:n]) {
			t.Fatalf("r%d applied another order than r1:\n%v\n%v", id, got[:n], ref[:n])
		}
		if ref == nil {
			ref = got
		}
	}
	dropped := 0
	for _, h := range g.hosts {
		h.mu.Lock()
		dropped += h.dropped
		h.mu.Unlock()
	}
	t.Logf("%d of %d proposals applied, %d refused by raft (no leader, transfer under way)", len(ref)-1, writers*each, dropped)
}

// TestReadIndexGroups queues read index requests on the leader while its
// loop is held in a raft log sync: with batching they share one raft read
// index (one heartbeat context), with MaxBatch 1 each has its own; either
// way each returns an index at or past an entry applied before it was
// asked.
func TestReadIndexGroups(t *testing.T) {
	const k = 16
	for _, batch := range []int{0, 1} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			g, gfs := newGateGroup(t, batch)
			g.until("leader", func() bool { return g.leader() != 0 })
			lead := g.leader()
			ctx := context.Background()
			if err := g.nodes[lead].Propose(ctx, 1, []byte("before")); err != nil {
				t.Fatal(err)
			}
			g.until("entry applied everywhere", func() bool { return g.appliedEverywhere(1) })
			g.hosts[lead].mu.Lock()
			before := g.hosts[lead].lastIndex
			g.hosts[lead].readCtxs = nil
			g.hosts[lead].mu.Unlock()
			gate := make(chan struct{})
			gfs.mu.Lock()
			gfs.gate, gfs.dir = gate, fmt.Sprintf("r%d", lead)
			gfs.mu.Unlock()
			if err := g.nodes[lead].Propose(ctx, 2, []byte("held")); err != nil {
				t.Fatal(err)
			}
			<-gfs.entered
			type result struct {
				idx uint64
				err error
			}
			results := make(chan result, k)
			for i := 0; i < k; i++ {
				go func(i int) {
					idx, err := g.nodes[lead].ReadIndex(ctx, uint64(100+i), time.Minute)
					results <- result{idx, err}
				}(i)
			}
			deadline := time.Now().Add(time.Minute)
			for len(g.nodes[lead].readc) < k {
				if time.Now().After(deadline) {
					t.Fatal("read index requests not queued")
				}
				time.Sleep(time.Millisecond)
			}
			gfs.mu.Lock()
			gfs.gate = nil
			gfs.mu.Unlock()
			close(gate)
			got := 0
			g.until("every read index answered", func() bool {
				for {
					select {
					case r := <-results:
						if r.err != nil || r.idx < before {
							t.Fatalf("read index %d, %v; an entry at %d was applied before", r.idx, r.err, before)
						}
						got++
					default:
						return got == k
					}
				}
			})
			g.hosts[lead].mu.Lock()
			rounds := len(g.hosts[lead].readCtxs)
			g.hosts[lead].mu.Unlock()
			if want := map[int]int{0: 1, 1: k}[batch]; rounds != want {
				t.Fatalf("batch %d: %d read index rounds for %d requests, want %d", batch, rounds, k, want)
			}
		})
	}
}

// TestLeaderSendsWhilePersisting holds the leader's raft log sync while it
// persists a proposal: the followers receive and persist the entry
// meanwhile (the leader's write overlaps theirs), and nobody applies it
// until the leader's own copy is durable. With MaxBatch 1 the leader sends
// only after its sync.
func TestLeaderSendsWhilePersisting(t *testing.T) {
	for _, batch := range []int{0, 1} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			g, gfs := newGateGroup(t, batch)
			g.until("leader", func() bool { return g.leader() != 0 })
			lead := g.leader()
			ctx := context.Background()
			if err := g.nodes[lead].Propose(ctx, 1, []byte("before")); err != nil {
				t.Fatal(err)
			}
			g.until("first entry applied everywhere", func() bool { return g.appliedEverywhere(1) })
			last, err := g.nodes[lead].cfg.Log.LastIndex()
			if err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			var release sync.Once
			open := func() {
				release.Do(func() {
					gfs.mu.Lock()
					gfs.gate = nil
					gfs.mu.Unlock()
					close(gate)
				})
			}
			t.Cleanup(open) // a failed check lets the held loop stop
			gfs.mu.Lock()
			gfs.gate, gfs.dir = gate, fmt.Sprintf("r%d", lead)
			gfs.mu.Unlock()
			if err := g.nodes[lead].Propose(ctx, 2, []byte("held")); err != nil {
				t.Fatal(err)
			}
			<-gfs.entered
			followersHave := func() bool {
				for id, n := range g.nodes {
					if id == lead {
						continue
					}
					if li, err := n.cfg.Log.LastIndex(); err != nil || li <= last {
						return false
					}
				}
				return true
			}
			if batch == 0 {
				// The clock stands still (no election can move leadership
				// meanwhile): only the held leader's messages can bring it.
				deadline := time.Now().Add(time.Minute)
				for !followersHave() {
					if time.Now().After(deadline) {
						t.Fatal("the followers did not receive the entry while the leader's sync was held")
					}
					time.Sleep(time.Millisecond)
				}
			} else if followersHave() {
				t.Fatal("batch 1: a follower has the entry before the leader persisted it")
			}
			for id, h := range g.hosts {
				h.mu.Lock()
				n := len(h.applied)
				h.mu.Unlock()
				if n != 1 {
					t.Fatalf("r%d applied %d entries while the leader's copy was not durable", id, n)
				}
			}
			open()
			g.until("entry applied everywhere", func() bool { return g.appliedEverywhere(2) })
		})
	}
}
