package flash

import (
	"fmt"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// TimingMode selects how operation latencies are applied.
type TimingMode int

const (
	// TimingNone runs operations as fast as the backend allows; completion
	// times equal issue times.
	TimingNone TimingMode = iota
	// TimingReal makes every operation take its modelled time on the wall
	// clock: the calling goroutine sleeps until the operation's completion
	// on its die's and channel's timelines, so throughput scales with the
	// channels used (SDF 002, Figure 7).
	TimingReal
	// TimingVirtual schedules operations on virtual timelines without
	// sleeping: ReadAt/ProgramAt/EraseAt take an issue time and return the
	// completion time (for the fleet simulator). Deterministic.
	TimingVirtual
)

func (m TimingMode) String() string {
	switch m {
	case TimingNone:
		return "none"
	case TimingReal:
		return "real"
	case TimingVirtual:
		return "virtual"
	}
	return fmt.Sprintf("TimingMode(%d)", int(m))
}

// ParseTimingMode parses "none", "real" or "virtual".
func ParseTimingMode(s string) (TimingMode, error) {
	for _, m := range []TimingMode{TimingNone, TimingReal, TimingVirtual} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, base.InvalidArgumentf("flash: unknown timing mode %q (want none, real or virtual)", s)
}

// Timing is the latency model of a NAND device. A read keeps the die busy for
// ReadLatency (array to page register) and then the channel for the page
// transfer; a program first transfers the page over the channel and then
// keeps the die busy for ProgramLatency; an erase keeps the die busy for
// EraseLatency. Dies of one channel share its bus (SDF 002 section 2:
// channels are independent, dies in a channel interleave on one bus).
type Timing struct {
	Mode           TimingMode
	ReadLatency    time.Duration // tR
	ProgramLatency time.Duration // tPROG per page
	EraseLatency   time.Duration // tBERS per block
	// ChannelBytesPerSecond is the bus bandwidth of one channel (0: the
	// transfer takes no time).
	ChannelBytesPerSecond int64
	// HostBytesPerSecond is the bandwidth of the device's host interface
	// (SAS, PCIe), shared by every channel: a read's data crosses it after
	// its channel transfer, a program's before (0: the host link takes no
	// time, so the channels bound the device). A device of many dies is
	// bounded by its host link, as the SSDs of Reparo 003 (section 1:
	// 8.8 hours to rebuild 32 TB over 12 Gbit/s SAS-2) are.
	HostBytesPerSecond int64
	// RealSlack (TimingReal only; 0: DefaultRealSlack) is how long a die may
	// sit idle between two operations and still be treated as continuously
	// busy. OS sleeps overshoot (about 1 ms on some kernels and sandboxes),
	// so a caller that issues its next operation as soon as the last one
	// returns arrives late; without the slack every overshoot would be lost
	// and throughput would fall far below the model. With it, sustained
	// throughput follows the modelled timelines, while a single operation's
	// latency is exact only to the sleep granularity.
	RealSlack time.Duration
}

// DefaultRealSlack is the default Timing.RealSlack.
const DefaultRealSlack = 2 * time.Millisecond

func (t Timing) validate() error {
	if t.Mode < TimingNone || t.Mode > TimingVirtual || t.ReadLatency < 0 || t.ProgramLatency < 0 ||
		t.EraseLatency < 0 || t.ChannelBytesPerSecond < 0 || t.HostBytesPerSecond < 0 || t.RealSlack < 0 {
		return base.InvalidArgumentf("flash: bad timing %s", t)
	}
	return nil
}

func (t Timing) String() string {
	s := fmt.Sprintf("%s tR=%v tPROG=%v tBERS=%v bus=%dB/s",
		t.Mode, t.ReadLatency, t.ProgramLatency, t.EraseLatency, t.ChannelBytesPerSecond)
	if t.HostBytesPerSecond > 0 {
		s += fmt.Sprintf(" host=%dB/s", t.HostBytesPerSecond)
	}
	return s
}

// HostTransferTime is the host interface time to move n bytes.
func (t Timing) HostTransferTime(n int) time.Duration {
	if t.HostBytesPerSecond == 0 {
		return 0
	}
	return time.Duration(int64(n) * int64(time.Second) / t.HostBytesPerSecond)
}

// TransferTime is the bus time to move n bytes over one channel.
func (t Timing) TransferTime(n int) time.Duration {
	if t.ChannelBytesPerSecond == 0 {
		return 0
	}
	return time.Duration(int64(n) * int64(time.Second) / t.ChannelBytesPerSecond)
}

func (t Timing) realSlack() time.Duration {
	if t.RealSlack == 0 {
		return DefaultRealSlack
	}
	return t.RealSlack
}

type opKind int

const (
	opRead opKind = iota
	opProgram
	opErase
)

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// schedule places one operation issued at issue on the die's timeline and,
// for transfers, its channel's bus and the host link, and returns its
// completion time. The caller holds d.mu.
func (e *Emulator) schedule(d *die, op opKind, issue time.Time) time.Time {
	t := e.opts.Timing
	if t.Mode == TimingNone {
		return issue
	}
	ch := e.channels[d.addr.Channel]
	xfer := t.TransferTime(e.geo.PageSize + e.geo.OOBSize)
	hostXfer := t.HostTransferTime(e.geo.PageSize)
	if t.Mode == TimingReal && issue.After(d.busyUntil) && issue.Sub(d.busyUntil) <= t.realSlack() {
		issue = d.busyUntil // the gap is sleep overshoot, not idleness
	}
	start := later(issue, d.busyUntil)
	var done time.Time
	switch op {
	case opRead:
		sensed := start.Add(t.ReadLatency)
		ch.mu.Lock()
		xs := later(sensed, ch.busUntil)
		done = xs.Add(xfer)
		ch.busUntil = done
		ch.mu.Unlock()
		ch.busy.Add(int64(xfer))
		// The die is free once its page left on the bus; the host link
		// only delays the completion the caller sees.
		d.ctr.busyNanos.Add(int64(done.Sub(start)))
		d.busyUntil = done
		if hostXfer > 0 {
			e.host.mu.Lock()
			hs := later(done, e.host.busUntil)
			done = hs.Add(hostXfer)
			e.host.busUntil = done
			e.host.mu.Unlock()
			e.host.busy.Add(int64(hostXfer))
		}
		return done
	case opProgram:
		if hostXfer > 0 {
			// The page reaches the controller before it goes down its
			// channel.
			e.host.mu.Lock()
			hs := later(issue, e.host.busUntil)
			e.host.busUntil = hs.Add(hostXfer)
			e.host.mu.Unlock()
			e.host.busy.Add(int64(hostXfer))
			start = later(start, hs.Add(hostXfer))
		}
		ch.mu.Lock()
		xs := later(start, ch.busUntil)
		ch.busUntil = xs.Add(xfer)
		ch.mu.Unlock()
		ch.busy.Add(int64(xfer))
		done = xs.Add(xfer + t.ProgramLatency)
	case opErase:
		done = start.Add(t.EraseLatency)
	}
	d.ctr.busyNanos.Add(int64(done.Sub(start)))
	d.busyUntil = done
	return done
}

// wait blocks until done in real timing mode.
func (e *Emulator) wait(done time.Time) {
	if e.opts.Timing.Mode != TimingReal {
		return
	}
	if d := done.Sub(e.opts.Clock.Now()); d > 0 {
		time.Sleep(d)
	}
}

// DieBusyUntil is when the die finishes its last scheduled operation on the
// device's timeline (zero before its first operation, and always with
// TimingNone). A simulator uses it to issue work to idle dies first.
func (e *Emulator) DieBusyUntil(a DieAddr) (time.Time, error) {
	if !e.checkDieAddr(a) {
		return time.Time{}, base.InvalidArgumentf("flash: die %s out of range for %s", a, e.geo)
	}
	d := e.dies[a.Index(e.geo)]
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.busyUntil, nil
}
