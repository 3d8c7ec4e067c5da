package channels

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/onflash"
)

// ErrClosed is the error of an operation queued after Stop (sdf.ErrClosed).
var ErrClosed = errors.New("sdf: closed")

// Kind is a device operation.
type Kind uint8

// The operations.
const (
	Read Kind = iota
	Program
	Erase
)

// Op is one device operation and, after it ran, its outcome.
type Op struct {
	Kind   Kind
	Addr   flash.PageAddr // for erase, Page is ignored
	Data   []byte
	OOB    []byte
	Status flash.ReadStatus
	Err    error
	// decode asks the worker to check a data page's OOB right after the
	// read, while the page is still in the CPU cache; id and idOK hold the
	// result.
	Decode bool
	ID     onflash.PageID
	IDOK   bool
	// RereadOnCheck (with Decode) asks the worker to read the page once
	// more, right away, when it fails its check with a clean device
	// status: a transient flip on the way out (DIRECT) is then absorbed
	// while the die still works on this request, instead of costing the
	// caller a second round trip to an idle channel after the request.
	// Reread reports that it happened; the Op then holds the second read.
	RereadOnCheck bool
	Reread        bool
	// Bind, when set on a read, is called by the worker right before each
	// read of the page (the re-read included) and may point Data at
	// another buffer of the same length: a read-ahead whose reader has
	// arrived reads its remaining pages straight into the reader's buffer
	// instead of its own (internal/sdf).
	Bind Binder
}

// Binder chooses a read's destination when the worker gets to it (Op.Bind).
type Binder interface {
	Bind(op *Op)
}

// request is a batch of operations on one channel. The worker runs the ops of
// each die in order and the dies in parallel (SDF stripes a write unit over
// the chips of a channel, section 2.3), then closes done.
type request struct {
	ops  []*Op
	done chan struct{}
}

// Stats counts one channel's operations.
type Stats struct {
	Reads, Programs, Erases atomic.Int64
	Errors                  atomic.Int64
}

// Worker is SDF's per-channel engine: one worker goroutine draining one
// bounded queue (section 2.4). Every device operation of the layer on the
// channel goes through it, so the channel's requests never interleave at
// page granularity with each other and the queue bounds in-flight work.
type Worker struct {
	id    int
	dev   flash.Device
	queue chan *request
	Stats Stats
	wg    sync.WaitGroup
	// mu orders do against stop: requests hold it shared until they
	// complete, stop takes it exclusively, so no request is sent on a
	// closed queue. Guarded by mu: stopped.
	mu      sync.RWMutex
	stopped bool
	// serial runs a request's operations one after another in their
	// order instead of its dies in parallel (StartSerial).
	serial bool
}

// Start starts the worker of channel id of dev with a queue of depth
// requests.
func Start(id int, dev flash.Device, depth int) *Worker {
	c := &Worker{id: id, dev: dev, queue: make(chan *request, depth)}
	c.wg.Add(1)
	go c.run()
	return c
}

func (c *Worker) run() {
	defer c.wg.Done()
	for req := range c.queue {
		c.execute(req.ops)
		close(req.done)
	}
}

// StartSerial is Start for a worker that runs each request's operations
// one after another, in the order given, instead of its dies in parallel:
// with one caller at a time, the device then sees the same sequence of
// operations on every run (sdf.Options.Serial; deterministic power-loss
// trials).
func StartSerial(id int, dev flash.Device, depth int) *Worker {
	c := &Worker{id: id, dev: dev, queue: make(chan *request, depth), serial: true}
	c.wg.Add(1)
	go c.run()
	return c
}

// Stop ends the worker once the requests in flight are done; later
// requests fail with ErrClosed.
func (c *Worker) Stop() {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.queue)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Do queues ops and waits until they ran. Ops must all be on this channel.
func (c *Worker) Do(ops ...*Op) {
	if len(ops) == 0 {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.stopped {
		for _, op := range ops {
			op.Err = ErrClosed
		}
		return
	}
	req := &request{ops: ops, done: make(chan struct{})}
	c.queue <- req
	<-req.done
}

func (c *Worker) execute(ops []*Op) {
	if len(ops) == 1 || c.serial {
		for _, op := range ops {
			c.one(op)
		}
		return
	}
	// Group by die, keeping each die's order.
	var perDie [64][]*Op
	used := 0
	for _, op := range ops {
		if len(perDie[op.Addr.Die]) == 0 {
			used++
		}
		perDie[op.Addr.Die] = append(perDie[op.Addr.Die], op)
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
		go func(list []*Op) {
			defer wg.Done()
			for _, op := range list {
				c.one(op)
			}
		}(perDie[d])
	}
	wg.Wait()
}

func (c *Worker) one(op *Op) {
	switch op.Kind {
	case Read:
		if op.Bind != nil {
			op.Bind.Bind(op)
		}
		op.Status, op.Err = c.dev.Read(op.Addr, op.Data, op.OOB)
		c.Stats.Reads.Add(1)
		if op.Decode && op.Err == nil {
			op.ID, op.IDOK = onflash.DecodeOOB(op.OOB, op.Data)
			if !op.IDOK && op.RereadOnCheck {
				op.Reread = true
				if op.Bind != nil {
					op.Bind.Bind(op)
				}
				op.Status, op.Err = c.dev.Read(op.Addr, op.Data, op.OOB)
				c.Stats.Reads.Add(1)
				if op.Err == nil {
					op.ID, op.IDOK = onflash.DecodeOOB(op.OOB, op.Data)
				}
			}
		}
	case Program:
		op.Err = c.dev.Program(op.Addr, op.Data, op.OOB)
		c.Stats.Programs.Add(1)
	case Erase:
		op.Err = c.dev.Erase(op.Addr.BlockAddr())
		c.Stats.Erases.Add(1)
	}
	if op.Err != nil {
		c.Stats.Errors.Add(1)
	}
}
