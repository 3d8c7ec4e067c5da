package base

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestBytesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Bytes
		str  string
	}{
		{"0", 0, "0B"},
		{"512", 512, "512B"},
		{"64KiB", 64 * KiB, "64KiB"},
		{"64k", 64 * KiB, "64KiB"},
		{"128MB", 128 * MiB, "128MiB"},
		{"1.5MiB", 1536 * KiB, "1536KiB"},
		{"2 GiB", 2 * GiB, "2GiB"},
		{"3T", 3 * TiB, "3TiB"},
		{"1000", 1000, "1000B"},
	} {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Fatalf("ParseBytes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.str {
			t.Fatalf("%d.String() = %q; want %q", int64(got), got.String(), tc.str)
		}
		back, err := ParseBytes(got.String())
		if err != nil || back != got {
			t.Fatalf("round trip of %q: %v, %v", got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "abc", "-1", "1.5", "0.3K", "99999999T"} {
		if _, err := ParseBytes(bad); !IsInvalidArgument(err) {
			t.Fatalf("ParseBytes(%q) err = %v; want invalid argument", bad, err)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	cause := errors.New("crc mismatch")
	c := CorruptionErrorf("chunk 3 of obj/1: %w", cause)
	if !IsCorruption(c) || !errors.Is(c, cause) || IsDataLoss(c) || IsInvalidArgument(c) {
		t.Fatalf("corruption error classified wrongly: %v", c)
	}
	if c.Error() != "corruption: chunk 3 of obj/1: crc mismatch" {
		t.Fatalf("message %q", c.Error())
	}
	d := DataLossErrorf("all replicas differ")
	if !IsDataLoss(d) || !IsCorruption(d) {
		t.Fatalf("data loss error classified wrongly: %v", d)
	}
	wrapped := fmt.Errorf("read: %w", d)
	if !IsDataLoss(wrapped) {
		t.Fatal("wrapping lost the class")
	}
	if IsCorruption(InvalidArgumentf("x")) || !IsInvalidArgument(InvalidArgumentf("x")) {
		t.Fatal("invalid argument misclassified")
	}
	if !errors.Is(AssertionFailedf("x"), ErrAssertionFailed) {
		t.Fatal("assertion misclassified")
	}
}

func TestManualClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewManualClock(start)
	if !c.Now().Equal(start) {
		t.Fatal("start")
	}
	c.Advance(time.Second)
	c.Set(start) // going back is ignored
	if got := c.Now(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("now %v", got)
	}
}

// TestManualClockWakes checks that ManualClock's timers and tickers fire
// when the clock reaches them, and only then.
func TestManualClockWakes(t *testing.T) {
	c := NewManualClock(time.Unix(1000, 0))
	fired := func(ch <-chan time.Time) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	timer := After(c, 10*time.Second)
	tick, stop := NewTicker(c, 3*time.Second)
	if !fired(After(c, 0)) {
		t.Fatal("a timer of 0 did not fire at once")
	}
	c.Advance(2 * time.Second)
	if fired(timer) || fired(tick) {
		t.Fatal("fired before its time")
	}
	c.Advance(time.Second)
	if fired(timer) || !fired(tick) {
		t.Fatal("the ticker did not fire at 3s")
	}
	c.Advance(7 * time.Second) // 10s: ticks at 6s and 9s were jumped over: one tick
	if !fired(timer) || !fired(tick) || fired(tick) {
		t.Fatal("at 10s: want the timer and one tick")
	}
	if fired(timer) {
		t.Fatal("a timer fired twice")
	}
	stop()
	c.Advance(time.Minute)
	if fired(tick) {
		t.Fatal("a stopped ticker fired")
	}
	if len(c.waiters) != 0 {
		t.Fatalf("%d waiters left", len(c.waiters))
	}
	// A clock that only reads time times out on the wall clock.
	select {
	case <-After(fixedClock{}, time.Millisecond):
	case <-time.After(time.Minute):
		t.Fatal("After on a plain Clock did not fire")
	}
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Unix(0, 0) }

func TestCRC32C(t *testing.T) {
	// The check value of CRC-32C (RFC 3720, appendix B.4) is the CRC of "123456789".
	if got, want := CRC32C([]byte("123456789")), uint32(0xe3069283); got != want {
		t.Fatalf("CRC32C(123456789) = %#x, want %#x", got, want)
	}
	a, b := []byte("flash"), []byte("mend")
	if got, want := CRC32CUpdate(CRC32C(a), b), CRC32C([]byte("flashmend")); got != want {
		t.Fatalf("CRC32CUpdate(CRC32C(a), b) = %#x, want CRC32C(ab) = %#x", got, want)
	}
	if got, want := CRC32CUpdate(0, b), CRC32C(b); got != want {
		t.Fatalf("CRC32CUpdate(0, b) = %#x, want %#x", got, want)
	}
}

func TestInFlight(t *testing.T) {
	var f InFlight[string]
	if !f.Begin("a") || f.Begin("a") || !f.Begin("b") {
		t.Fatal("a key in progress started twice, or another key refused")
	}
	f.End("a")
	if !f.Begin("a") {
		t.Fatal("a finished key cannot start again")
	}
}

func TestSetDefaultFillsOnlyZeroFields(t *testing.T) {
	opts := struct {
		Depth   int
		Ratio   float64
		Timeout time.Duration
	}{Depth: 0, Ratio: 0.5}
	SetDefault(&opts.Depth, 16)
	SetDefault(&opts.Ratio, 0.9)
	SetDefault(&opts.Timeout, time.Second)
	if opts.Depth != 16 || opts.Ratio != 0.5 || opts.Timeout != time.Second {
		t.Fatalf("after SetDefault: %+v", opts)
	}
}

func TestLogLinesFromSeveralGoroutines(t *testing.T) {
	var l LogLines
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 25; i++ {
				l.Logf("g%d line %d", g, i)
			}
		}(g)
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	if n := strings.Count(l.String(), "\n"); n != 100 {
		t.Fatalf("%d lines, want 100", n)
	}
}
