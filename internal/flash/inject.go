package flash

import (
	"fmt"
	"sync"
)

// Faults injects chosen faults at the device boundary so upper layers can
// test each failure path: a failing program or erase (the block is retired
// as a grown bad block), a lost program (acknowledged, never made), and
// reads that return flipped bits (transient or written into the cells) or
// report an uncorrectable page. Each injected
// fault fires once, on the next matching operation. Get it with
// Emulator.Faults. Safe for concurrent use.
type Faults struct {
	mu       sync.Mutex
	programs map[PageAddr]int
	erases   map[BlockAddr]int
	flips    map[PageAddr][]injectedFlip
	uncorr   map[PageAddr]int
	lost     map[PageAddr]int
}

type injectedFlip struct {
	bit        int
	persistent bool
}

func newFaults() *Faults {
	return &Faults{
		programs: map[PageAddr]int{},
		erases:   map[BlockAddr]int{},
		flips:    map[PageAddr][]injectedFlip{},
		uncorr:   map[PageAddr]int{},
		lost:     map[PageAddr]int{},
	}
}

// Faults returns the device's fault injector.
func (e *Emulator) Faults() *Faults { return e.inject }

// FailProgram makes the next program of page a fail with ErrProgramFailed
// (the block is retired).
func (f *Faults) FailProgram(a PageAddr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.programs[a]++
}

// FailErase makes the next erase of block a fail with ErrEraseFailed (the
// block is retired).
func (f *Faults) FailErase(a BlockAddr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.erases[a]++
}

// FlipBit makes the next read of programmed page a return bit (0 <= bit <
// 8*(PageSize+OOBSize); bit 0 is the low bit of data[0], the OOB follows the
// data) inverted, with a clean status, as an UBER-mode flip does. If
// persistent, the flip is also written into the stored page, so later reads
// see it too.
func (f *Faults) FlipBit(a PageAddr, bit int, persistent bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flips[a] = append(f.flips[a], injectedFlip{bit, persistent})
}

// FailRead makes the next read of programmed page a report an uncorrectable
// page (status and ErrUncorrectable); the content is returned as stored
// (plus any flips).
func (f *Faults) FailRead(a PageAddr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uncorr[a]++
}

// LoseProgram makes the next program of page a a lost write: it reports
// success and takes the page, but the cells keep the erased pattern (every
// data and OOB byte 0xFF), as a program the device acknowledged and never
// made. Only the page's checksum, above the device, can tell.
func (f *Faults) LoseProgram(a PageAddr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost[a]++
}

// Clear drops every injected fault that has not fired yet.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.programs)
	clear(f.erases)
	clear(f.flips)
	clear(f.uncorr)
	clear(f.lost)
}

// Pending is the number of injected faults that have not fired yet.
func (f *Faults) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.programs {
		n += c
	}
	for _, c := range f.erases {
		n += c
	}
	for _, c := range f.uncorr {
		n += c
	}
	for _, c := range f.lost {
		n += c
	}
	for _, l := range f.flips {
		n += len(l)
	}
	return n
}

func (f *Faults) String() string { return fmt.Sprintf("faults(%d pending)", f.Pending()) }

func take[K comparable](m map[K]int, k K) bool {
	if m[k] == 0 {
		return false
	}
	if m[k]--; m[k] == 0 {
		delete(m, k)
	}
	return true
}

func (f *Faults) programFails(a PageAddr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return take(f.programs, a)
}

func (f *Faults) programLost(a PageAddr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return take(f.lost, a)
}

func (f *Faults) eraseFails(a BlockAddr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return take(f.erases, a)
}

// applyRead applies the flips and read failures injected for a to buf and
// eff. Bits outside the page are ignored (FlipBit does not know the
// geometry; the read path bounds-checks instead).
func (f *Faults) applyRead(a PageAddr, buf []byte, eff *ReadEffect) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if take(f.uncorr, a) {
		eff.Status.Uncorrectable = true
	}
	flips := f.flips[a]
	if len(flips) == 0 {
		return
	}
	delete(f.flips, a)
	for _, fl := range flips {
		if fl.bit < 0 || fl.bit >= len(buf)*8 {
			continue
		}
		flipBit(buf, fl.bit)
		eff.FlippedBits++
		eff.InjectedFlips++
		eff.RawBitErrors++
		if fl.persistent {
			eff.Persist = true
		}
	}
}
