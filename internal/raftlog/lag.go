package raftlog

import (
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// copyWriter appends the later copy of each record and syncs it in the
// background, after Save has synced copy 0 and returned.
//
// Why: a put waits for a majority of replicas to persist its entry, and a
// replica that wrote copy 1 only after copy 0 was synced and synced it too
// before it answered had two fsyncs in series on every put's path (0.5 ms
// of a 2 ms put on our machines; etcd's WAL has one). Now Save returns once
// copy 0 is synced; copy 1 gets the same bytes right after, in order, and
// is synced by this writer, which takes everything queued by the time it
// runs in one write and one sync (under load, several Saves share a sync of
// copy 1).
//
// What stays true: copy 1 of a record is written only after copy 0 of it
// was synced, so a crash tears copy 0 only where copy 1 holds nothing
// (parseCopies' rule that bytes in copy 1 mean copy 0 held the record whole
// still holds), and copy 1 may now lag copy 0 by several records, which
// parseCopies reads like any copy that ends early. What weakens: for the
// moment between Save's return and this writer's sync (one fsync, about
// 0.2 ms), an acknowledged record has one synced copy; a crash in that
// moment followed by damage to that very record of copy 0 before the next
// Open loses it on this replica (it reads as a torn tail). Both must happen
// to the same record within one sync, on one replica of the majority that
// acknowledged it.
//
// A failed write or sync of copy 1 is kept (err) and fails the next Save:
// the log's files are then in an unknown state, as after any failed write.
type copyWriter struct {
	mu    sync.Mutex
	cond  sync.Cond
	file  vfs.File
	queue [][]byte
	busy  bool  // the goroutine writes and syncs a batch it took
	err   error // first failure; later batches are dropped
	done  bool  // stop: the goroutine exits once the queue is empty
	exit  sync.WaitGroup
	// syncs counts the syncs of copy 1 (tests).
	syncs int
}

func newCopyWriter(f vfs.File) *copyWriter {
	w := &copyWriter{file: f}
	w.cond.L = &w.mu
	w.exit.Add(1)
	go w.run()
	return w
}

func (w *copyWriter) run() {
	defer w.exit.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.queue) == 0 && !w.done {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			return
		}
		batch := w.queue
		w.queue = nil
		if w.err != nil {
			continue // the file is in an unknown state: write nothing more
		}
		w.busy = true
		w.mu.Unlock()
		err := w.writeAndSync(batch)
		w.mu.Lock()
		w.busy = false
		w.syncs++
		if err != nil && w.err == nil {
			w.err = err
		}
		w.cond.Broadcast()
	}
}

func (w *copyWriter) writeAndSync(batch [][]byte) error {
	for _, b := range batch {
		if _, err := w.file.Write(b); err != nil {
			return err
		}
	}
	return w.file.Sync()
}

// append queues data (owned by the writer from now on) for copy 1. It
// returns an earlier write's or sync's failure instead.
func (w *copyWriter) append(data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.queue = append(w.queue, data)
	w.cond.Broadcast()
	return nil
}

// syncCount returns how many times the writer synced copy 1.
func (w *copyWriter) syncCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.syncs
}

// failure returns the first failed write or sync of copy 1, or nil.
func (w *copyWriter) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// drain waits until everything queued is written and synced, and returns
// the first failure.
func (w *copyWriter) drain() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for (len(w.queue) > 0 || w.busy) && w.err == nil {
		w.cond.Wait()
	}
	return w.err
}

// stop drains the queue and ends the goroutine; the file stays open (its
// owner closes it).
func (w *copyWriter) stop() error {
	err := w.drain()
	w.mu.Lock()
	w.done = true
	w.cond.Broadcast()
	w.mu.Unlock()
	w.exit.Wait()
	return err
}
