package flash

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchGeometry is a slice of the SDF device: 8 KiB pages with 448 spare
// bytes, 256-page (2 MiB) blocks.
func benchGeometry(channels int) Geometry {
	return Geometry{Channels: channels, DiesPerChannel: 2, BlocksPerDie: 4, PagesPerBlock: 256, PageSize: 8192, OOBSize: 448}
}

// benchPhysicalModel is the physical error model of 25 nm MLC with BCH
// correcting 40 bits per 1 KiB codeword (the parameters of flash/catalog's
// sdf preset).
var benchPhysicalModel = PhysicalModel{Fit: RBERFit{Fresh: 1e-7, AtRated: 3e-4, RatedEndurance: 3000, WearExponent: 2,
	RetentionPerDecade: 0.3, ReadDisturbPerRead: 1e-10}, CodewordBytes: 1024, CorrectableBits: 40, PageSigma: 0.3, Seed: 1}

func benchModels() []struct {
	name  string
	model ErrorModel
} {
	return []struct {
		name  string
		model ErrorModel
	}{
		{"none", nil},
		{"uber=1e-7", UBERModel{UBER: 1e-7}},
		{"uber=1e-7-persistent", UBERModel{UBER: 1e-7, Persistent: true}},
		{"physical-mlc", benchPhysicalModel},
	}
}

// BenchmarkMemoryRead measures page reads of the memory backend (no timing
// model) with and without an error model, one goroutine.
func BenchmarkMemoryRead(b *testing.B) {
	for _, m := range benchModels() {
		b.Run(m.name, func(b *testing.B) {
			g := benchGeometry(2)
			e, err := NewMemory(g, Options{Seed: 1, ErrorModel: m.model})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			fillDevice(b, e)
			pages := allPages(g)
			data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
			b.SetBytes(int64(g.PageSize))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.Read(pages[i%len(pages)], data, oob); err != nil && m.model == nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s := e.Stats().Total
			b.ReportMetric(float64(s.FlippedBits), "flips")
		})
	}
}

// BenchmarkMemoryProgram measures page programs of the memory backend (an
// erase every PagesPerBlock programs is included), one goroutine.
func BenchmarkMemoryProgram(b *testing.B) {
	for _, m := range benchModels()[:2] {
		b.Run(m.name, func(b *testing.B) {
			g := benchGeometry(2)
			e, err := NewMemory(g, Options{Seed: 1, ErrorModel: m.model})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			pages := allPages(g)
			data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
			b.SetBytes(int64(g.PageSize))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pa := pages[i%len(pages)]
				if pa.Page == 0 && i >= len(pages) {
					if err := e.Erase(pa.BlockAddr()); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.Program(pa, data, oob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemoryReadParallel reads with one goroutine per die: ops on
// different dies do not contend.
func BenchmarkMemoryReadParallel(b *testing.B) {
	g := benchGeometry(4)
	e, err := NewMemory(g, Options{Seed: 1, ErrorModel: UBERModel{UBER: 1e-7}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	fillDevice(b, e)
	b.SetBytes(int64(g.PageSize))
	b.ResetTimer()
	runPerDie(b, e, g.Channels*g.DiesPerChannel, func(die, i int) PageAddr {
		return PageAddr{die / g.DiesPerChannel, die % g.DiesPerChannel, (i / g.PagesPerBlock) % g.BlocksPerDie, i % g.PagesPerBlock}
	})
}

// BenchmarkRealTimingChannels reads with SDF timing (SDF 002: 40 MB/s
// channels, tR 50 us) using one goroutine per channel, as SDF uses one
// thread per channel; throughput grows with the channels used (SDF 002
// Figure 7): the per-channel rate is the benchmark's own MB/s output
// (go test -run - -bench RealTimingChannels ./internal/flash).
func BenchmarkRealTimingChannels(b *testing.B) {
	// SDF 002 Table 3's timing (flash/catalog's sdf preset): tR 50 us,
	// 40 MB/s channels.
	sdfTiming := Timing{ReadLatency: 50 * time.Microsecond, ProgramLatency: 500 * time.Microsecond,
		EraseLatency: 4400 * time.Microsecond, ChannelBytesPerSecond: 40_000_000}
	for _, channels := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("channels=%d", channels), func(b *testing.B) {
			g := benchGeometry(channels)
			e, err := NewMemory(g, Options{Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			fillDevice(b, e)
			e.opts.Timing = sdfTiming
			e.opts.Timing.Mode = TimingReal
			b.SetBytes(int64(g.PageSize))
			b.ResetTimer()
			runPerDie(b, e, channels, func(ch, i int) PageAddr {
				// Alternate the channel's two dies, as a channel worker
				// striping over its dies would.
				return PageAddr{ch, i % 2, (i / 2 / g.PagesPerBlock) % g.BlocksPerDie, (i / 2) % g.PagesPerBlock}
			})
		})
	}
}

// runPerDie splits b.N reads over n workers; addr maps (worker, i) to a page.
func runPerDie(b *testing.B, e *Emulator, n int, addr func(worker, i int) PageAddr) {
	g := e.Geometry()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		count := b.N / n
		if w < b.N%n {
			count++
		}
		wg.Add(1)
		go func(w, count int) {
			defer wg.Done()
			data := make([]byte, g.PageSize)
			for i := 0; i < count; i++ {
				if _, err := e.Read(addr(w, i), data, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}(w, count)
	}
	wg.Wait()
}
