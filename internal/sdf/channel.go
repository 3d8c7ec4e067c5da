package sdf

import (
	"sync"
	"sync/atomic"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// opKind is a device operation.
type opKind uint8

const (
	opRead opKind = iota
	opProgram
	opErase
)

// pageOp is one device operation and, after it ran, its outcome.
type pageOp struct {
	kind   opKind
	addr   flash.PageAddr // for erase, Page is ignored
	data   []byte
	oob    []byte
	status flash.ReadStatus
	err    error
	// decode asks the worker to check a data page's OOB right after the
	// read, while the page is still in the CPU cache; id and idOK hold the
	// result.
	decode bool
	id     onflash.PageID
	idOK   bool
}

// request is a batch of operations on one channel. The worker runs the ops of
// each die in order and the dies in parallel (SDF stripes a write unit over
// the chips of a channel, section 2.3), then closes done.
type request struct {
	ops  []*pageOp
	done chan struct{}
}

// channelStats counts one channel's operations.
type channelStats struct {
	reads, programs, erases atomic.Int64
	errors                  atomic.Int64
}

// channel is SDF's per-channel engine: one worker goroutine draining one
// bounded queue (section 2.4). Every device operation of the layer on the
// channel goes through it, so the channel's requests never interleave at
// page granularity with each other and the queue bounds in-flight work.
type channel struct {
	id    int
	dev   flash.Device
	queue chan *request
	stats channelStats
	wg    sync.WaitGroup
	// mu orders do against stop: requests hold it shared until they
	// complete, stop takes it exclusively, so no request is sent on a
	// closed queue. Guarded by mu: stopped.
	mu      sync.RWMutex
	stopped bool
}

func startChannel(id int, dev flash.Device, depth int) *channel {
	c := &channel{id: id, dev: dev, queue: make(chan *request, depth)}
	c.wg.Add(1)
	go c.run()
	return c
}

func (c *channel) run() {
	defer c.wg.Done()
	for req := range c.queue {
		c.execute(req.ops)
		close(req.done)
	}
}

// stop ends the worker once the requests in flight are done; later
// requests fail with ErrClosed.
func (c *channel) stop() {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.queue)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// do queues ops and waits until they ran. Ops must all be on this channel.
func (c *channel) do(ops ...*pageOp) {
	if len(ops) == 0 {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.stopped {
		for _, op := range ops {
			op.err = ErrClosed
		}
		return
	}
	req := &request{ops: ops, done: make(chan struct{})}
	c.queue <- req
	<-req.done
}

func (c *channel) execute(ops []*pageOp) {
	if len(ops) == 1 {
		c.one(ops[0])
		return
	}
	// Group by die, keeping each die's order.
	var perDie [64][]*pageOp
	used := 0
	for _, op := range ops {
		if len(perDie[op.addr.Die]) == 0 {
			used++
		}
		perDie[op.addr.Die] = append(perDie[op.addr.Die], op)
	}
	if used == 1 {
		for _, op := range ops {
			c.one(op)
		}
		return
	}
	var wg sync.WaitGroup
	for d := range perDie {
		if len(perDie[d]) == 0 {
			continue
		}
		wg.Add(1)
		go func(list []*pageOp) {
			defer wg.Done()
			for _, op := range list {
				c.one(op)
			}
		}(perDie[d])
	}
	wg.Wait()
}

func (c *channel) one(op *pageOp) {
	switch op.kind {
	case opRead:
		op.status, op.err = c.dev.Read(op.addr, op.data, op.oob)
		c.stats.reads.Add(1)
		if op.decode && op.err == nil {
			op.id, op.idOK = onflash.DecodeOOB(op.oob, op.data)
		}
	case opProgram:
		op.err = c.dev.Program(op.addr, op.data, op.oob)
		c.stats.programs.Add(1)
	case opErase:
		op.err = c.dev.Erase(op.addr.BlockAddr())
		c.stats.erases.Add(1)
	}
	if op.err != nil {
		c.stats.errors.Add(1)
	}
}
