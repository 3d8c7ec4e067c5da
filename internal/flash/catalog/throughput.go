package catalog

import (
	"fmt"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// Throughput is the result of SequentialThroughput.
type Throughput struct {
	Channels int
	// ReadBytesPerSecond and WriteBytesPerSecond are data bytes (spare
	// areas excluded) per second of virtual time.
	ReadBytesPerSecond, WriteBytesPerSecond float64
}

func (t Throughput) String() string {
	return fmt.Sprintf("%d channels: read %.3f GB/s, write %.3f GB/s", t.Channels, t.ReadBytesPerSecond/1e9, t.WriteBytesPerSecond/1e9)
}

// maxThroughputPages bounds the work of one SequentialThroughput call.
const maxThroughputPages = 1 << 22

// SequentialThroughput replays the microbenchmark of SDF 002 section 3.2
// (Figure 7) in virtual time: one worker per channel on the first channels
// channels, each issuing requests synchronous requests of requestBytes;
// a request is served by one channel, its pages striped over the channel's
// dies. Writes go to fresh blocks (the erases are done beforehand, as SDF
// erases ahead of writes); reads read the written pages back. The result is
// deterministic: it depends only on the geometry and the timing.
func SequentialThroughput(g flash.Geometry, t flash.Timing, channels, requests int, requestBytes base.Bytes) (Throughput, error) {
	if err := g.Validate(); err != nil {
		return Throughput{}, err
	}
	pagesPerRequest := int(requestBytes / base.Bytes(g.PageSize))
	switch {
	case channels < 1 || channels > g.Channels:
		return Throughput{}, base.InvalidArgumentf("flash: %d channels outside [1, %d]", channels, g.Channels)
	case requests < 1 || pagesPerRequest < 1 || requestBytes%base.Bytes(g.PageSize) != 0:
		return Throughput{}, base.InvalidArgumentf("flash: %d requests of %s (need >= 1 of a multiple of the %d-byte page)",
			requests, requestBytes, g.PageSize)
	case int64(channels)*int64(requests)*int64(pagesPerRequest) > maxThroughputPages:
		return Throughput{}, base.InvalidArgumentf("flash: %d x %d requests of %s is more than %d pages",
			channels, requests, requestBytes, maxThroughputPages)
	}
	// Enough fresh blocks for every page a die receives.
	perDie := (requests*pagesPerRequest + g.DiesPerChannel - 1) / g.DiesPerChannel
	g.BlocksPerDie = (perDie + g.PagesPerBlock - 1) / g.PagesPerBlock
	t.Mode = flash.TimingVirtual
	t0 := time.Unix(0, 0)
	e, err := flash.NewDiscard(g, flash.Options{Timing: t, Clock: base.NewManualClock(t0)})
	if err != nil {
		return Throughput{}, err
	}
	defer e.Close()
	data := make([]byte, g.PageSize)
	run := func(start time.Time, op func(issue time.Time, a flash.PageAddr) (time.Time, error)) (time.Time, error) {
		end := start
		for c := 0; c < channels; c++ {
			issue, next := start, make([]int, g.DiesPerChannel)
			for r := 0; r < requests; r++ {
				done := issue
				for p := 0; p < pagesPerRequest; p++ {
					d := p % g.DiesPerChannel
					a := flash.PageAddr{Channel: c, Die: d, Block: next[d] / g.PagesPerBlock, Page: next[d] % g.PagesPerBlock}
					next[d]++
					fin, err := op(issue, a)
					if err != nil {
						return time.Time{}, err
					}
					done = laterOf(done, fin)
				}
				issue = done // synchronous: the next request waits
			}
			end = laterOf(end, issue)
		}
		return end, nil
	}
	wEnd, err := run(t0, func(issue time.Time, a flash.PageAddr) (time.Time, error) { return e.ProgramAt(issue, a, data, nil) })
	if err != nil {
		return Throughput{}, err
	}
	rEnd, err := run(wEnd, func(issue time.Time, a flash.PageAddr) (time.Time, error) {
		_, done, err := e.ReadAt(issue, a, data, nil)
		return done, err
	})
	if err != nil {
		return Throughput{}, err
	}
	total := float64(channels) * float64(requests) * float64(pagesPerRequest) * float64(g.PageSize)
	return Throughput{
		Channels:            channels,
		WriteBytesPerSecond: total / wEnd.Sub(t0).Seconds(),
		ReadBytesPerSecond:  total / rEnd.Sub(wEnd).Seconds(),
	}, nil
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
