package flash

import (
	"errors"
	"fmt"
	"time"
)

// ErrContent is returned by the content-free operations (ReadRunAt,
// ProgramRunAt) on a device that stores page content: there they would leave
// pages programmed without content.
var ErrContent = errors.New("flash: content-free operation on a device that stores content (use NewDiscard)")

// ProgramRunAt programs n consecutive pages of one block, from first, without
// content, issued at issue; it returns when the last one completes on the
// device's timelines. It is for a device that stores no content (NewDiscard):
// simulations at a scale where pages cannot be held, which still need every
// page's NAND rules, wear, failures, statistics and timing. Each page is
// scheduled as one Program would be (die, channel bus, host link), so a run
// takes exactly the time of its n programs; a run is only cheaper to call.
// It stops at the first page that fails and returns that page's error.
func (e *Emulator) ProgramRunAt(issue time.Time, first PageAddr, n int) (time.Time, error) {
	done, err := e.programRunAt(issue, first, n)
	e.persistIfDue()
	return done, err
}

func (e *Emulator) programRunAt(issue time.Time, first PageAddr, n int) (time.Time, error) {
	const op = "program"
	if err := e.checkRun(first, n); err != nil {
		return time.Time{}, opErr(op, first, err)
	}
	d, issue, err := e.lockDie(op, first, issue)
	if err != nil {
		return time.Time{}, err
	}
	defer d.mu.Unlock()
	b := &d.blocks[first.Block]
	if err := d.checkProgramLocked(op, b, first); err != nil {
		return time.Time{}, err
	}
	done := issue
	a := first
	for i := 0; i < n; i++ {
		a.Page = first.Page + i
		done = e.schedule(d, opProgram, issue)
		if d.silent || e.programFails(d, b, a) {
			d.markBad(b)
			d.ctr.programFailures.Add(1)
			d.ctr.failedOps.Add(1)
			return done, opErr(op, a, ErrProgramFailed)
		}
		if b.written == 0 {
			b.programUnixNano = issue.UnixNano()
		}
		b.written++
		d.ctr.programs.Add(1)
		d.ctr.bytesProgrammed.Add(int64(e.geo.PageSize))
	}
	e.wait(done)
	return done, nil
}

// ReadRunAt reads n consecutive pages of one block, from first, without
// content (see ProgramRunAt), issued at issue, and returns when the last one
// completes. The error model is not applied (there is no content to flip);
// a die that failed silently reads uncorrectable, as with ReadAt.
func (e *Emulator) ReadRunAt(issue time.Time, first PageAddr, n int) (time.Time, error) {
	const op = "read"
	if err := e.checkRun(first, n); err != nil {
		return time.Time{}, opErr(op, first, err)
	}
	d, issue, err := e.lockDie(op, first, issue)
	if err != nil {
		return time.Time{}, err
	}
	defer d.mu.Unlock()
	b := &d.blocks[first.Block]
	if b.bad {
		d.ctr.failedOps.Add(1)
		return time.Time{}, opErr(op, first, ErrBadBlock)
	}
	done := issue
	for i := 0; i < n; i++ {
		done = e.schedule(d, opRead, issue)
		if d.silent {
			d.ctr.failedOps.Add(1)
			d.ctr.uncorrectable.Add(1)
			a := first
			a.Page += i
			return done, opErr(op, a, ErrUncorrectable)
		}
		d.ctr.reads.Add(1)
		d.ctr.bytesRead.Add(int64(e.geo.PageSize))
		b.reads++
		if first.Page+i < int(b.written) {
			b.readsSinceErase++
		}
	}
	e.wait(done)
	return done, nil
}

func (e *Emulator) checkRun(first PageAddr, n int) error {
	if _, ok := e.st.(*discardStore); !ok {
		return ErrContent
	}
	if n <= 0 || !e.geo.Contains(first) || first.Page+n > e.geo.PagesPerBlock {
		return fmt.Errorf("%w: run of %d pages from %s", ErrOutOfRange, n, first)
	}
	return nil
}
