package sdf

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/catalog"
)

// BenchmarkSequentialRead is the sequential read of the sdf experiment
// (docs/results/sdf.md) as a Go benchmark: one file per channel pinned to
// its channel, read in order in requests of one zone with read-ahead of
// one request ("layer"), against the raw device read of the same pages,
// one goroutine per die, unverified ("raw"). It reports, besides MB/s,
// the process's CPU seconds (user+system, getrusage) per 10^9 bytes read:
// CPU per byte moves far less than MB/s with the load of a shared
// machine. "none" runs without device timing (pure CPU); "real" sleeps
// the sdf preset's latencies, as the experiment does.
//
//	go test ./internal/sdf -run '^$' -bench SequentialRead -benchtime 20x
func BenchmarkSequentialRead(b *testing.B) {
	for _, c := range []struct {
		channels int
		timing   flash.TimingMode
	}{{1, flash.TimingNone}, {4, flash.TimingNone}, {44, flash.TimingReal}} {
		for _, path := range []string{"layer", "raw"} {
			b.Run(fmt.Sprintf("timing=%s/channels=%d/%s", c.timing, c.channels, path), func(b *testing.B) {
				benchSequentialRead(b, c.channels, c.timing, path == "raw")
			})
		}
	}
}

func benchSequentialRead(b *testing.B, channels int, timing flash.TimingMode, raw bool) {
	g := flash.SDFGeometry(16)
	g.Channels = channels
	preset, err := catalog.Lookup("sdf")
	if err != nil {
		b.Fatal(err)
	}
	dev, err := flash.NewMemory(g, preset.Options(timing, nil, 1))
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	fs, err := Format(dev, Options{MaxOpenZones: max(8, 2*channels)})
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	zone := g.DiesPerChannel * fs.l.DataPagesPerBlock() * g.PageSize
	size := 3 * zone
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for c := 0; c < channels; c++ {
		f, err := fs.CreateOn(fmt.Sprintf("c%d", c), LifetimeShort, c)
		writeAndClose(b, f, err, payload)
	}
	bufs := make([][]byte, channels)
	for c := range bufs {
		bufs[c] = make([]byte, zone)
		for i := 0; i < zone; i += 4096 {
			bufs[c][i] = 1
		}
	}
	var pages [][]flash.PageAddr // per die
	if raw {
		perDie := map[flash.DieAddr][]flash.PageAddr{}
		for c := 0; c < channels; c++ {
			f, err := fs.OpenFile(fmt.Sprintf("c%d", c))
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range fs.DataPages(f) {
				perDie[a.DieAddr()] = append(perDie[a.DieAddr()], a)
			}
			f.Close()
		}
		for _, list := range perDie {
			pages = append(pages, list)
		}
	}
	b.SetBytes(int64(channels) * int64(size))
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		errs := make([]error, max(channels, len(pages)))
		if raw {
			for d, list := range pages {
				wg.Add(1)
				go func() {
					defer wg.Done()
					data, oob := make([]byte, g.PageSize), make([]byte, g.OOBSize)
					for _, a := range list {
						if _, err := dev.Read(a, data, oob); err != nil {
							errs[d] = err
							return
						}
					}
				}()
			}
		} else {
			for c := 0; c < channels; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A fresh File per pass: its first read, at offset 0,
					// starts the read-ahead.
					f, err := fs.OpenFile(fmt.Sprintf("c%d", c))
					if err == nil {
						err = f.SetReadAhead(base.Bytes(zone))
					}
					if err != nil {
						errs[c] = err
						return
					}
					defer f.Close()
					for off := 0; off < size; off += zone {
						n := min(zone, size-off)
						if _, err := f.ReadAt(bufs[c][:n], int64(off)); err != nil {
							errs[c] = err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := processCPU(b) - cpu0
	b.ReportMetric(cpu.Seconds()/(float64(b.N)*float64(channels)*float64(size)/1e9), "CPU-s/GB")
}

// processCPU is the process's user+system CPU time.
func processCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
