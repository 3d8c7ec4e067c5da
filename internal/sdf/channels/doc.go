// Package channels is the SDF layer's device I/O engine (internal/sdf; SDF
// 002 section 2.4): one worker goroutine and one bounded queue per flash
// channel. Every device operation of the layer (read, program, erase: an
// Op) goes to the Worker of its channel as part of a request; the worker
// runs each die's operations in order and the dies of the channel in
// parallel (a zone stripes its pages over the channel's dies, section 2.3),
// and optionally checks a read data page's OOB identity right after the
// read (Op.Decode). internal/sdf decides what to read and write; this
// package only executes it and counts the operations (Stats).
//
// # Invariants
//
//   - The operations of one request on one die run in the order given,
//     and requests on a channel never interleave at page granularity.
//   - At most the queue's depth of requests wait on a channel.
//   - After Stop, no request reaches the device: every Op fails with
//     ErrClosed.
//
// # Failure model
//
// A device error is the Op's Err (and counted in Stats.Errors); the worker
// never retries or interprets it: internal/sdf verifies, retires blocks and
// declares dies failed. The one retry is a read whose data fails its OOB
// check with a clean device status, when the Op asks for it
// (Op.RereadOnCheck): the worker reads it once more in place (Op.Reread),
// so a transient flip costs one page time on its die, not a round trip.
//
// A read may also choose its buffer when the worker gets to it (Op.Bind):
// the SDF layer's read-ahead sends the pages its reader is already waiting
// for straight into the reader's buffer.
package channels
