package experiments

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/reparo"
	"github.com/flashmend/flashmend/internal/sdf"
)

// sdfLoadOptions configures runSDFLoads: SDF's microbenchmarks (SDF 002 section
// 3.2, Table 4 and Figure 7) run through this layer, with a raw-device read
// of the same pages in the same run as the reference.
type sdfLoadOptions struct {
	// Channels lists the channel counts to measure (default 1, 2, 4, ...,
	// all).
	Channels []int
	// BytesPerChannel is the file size per channel (default: a quarter of a
	// channel's usable bytes, at most 16MiB).
	BytesPerChannel base.Bytes
	// RequestBytes is the size of one sequential read or write (default one
	// zone's data bytes, SDF's write unit).
	RequestBytes base.Bytes
	// RandomReadBytes are the random-read request sizes (default 8KiB,
	// 16KiB, 64KiB as Table 4).
	RandomReadBytes []base.Bytes
	// RandomReads is the random reads per channel per size (default 200).
	RandomReads int
	Seed        int64
	// NoPlainRead skips the sequential read without read-ahead.
	NoPlainRead bool
	// Profile, when set, is a file that receives the CPU profile of the
	// sequential read (with read-ahead) on all channels.
	Profile string
}

// sdfRow is one measurement.
type sdfRow struct {
	Test     string // "seq-write", "seq-read", "raw-read", "rand-read"
	Channels int
	Request  base.Bytes
	Bytes    int64
	Elapsed  time.Duration
	Errors   int64 // reads that returned a corruption (counted, not fatal)
	// CPU is the whole process's user+system CPU time over the
	// measurement (the process does nothing else meanwhile).
	CPU time.Duration
}

// CPUSecondsPerGB is the CPU time the row's bytes cost, in seconds per
// 10^9 bytes (0 when unmeasured).
func (r sdfRow) CPUSecondsPerGB() float64 {
	if r.Bytes <= 0 {
		return 0
	}
	return r.CPU.Seconds() / (float64(r.Bytes) / 1e9)
}

// MBps is the throughput in 10^6 bytes per second.
func (r sdfRow) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6
}

func (r sdfRow) String() string {
	return fmt.Sprintf("%-9s ch=%-3d req=%-6s %8.1f MB/s errors=%d", r.Test, r.Channels, r.Request, r.MBps(), r.Errors)
}

// runSDFLoads runs the throughput benchmarks on fs (which must be on dev and
// should be empty; the files it writes are removed at the end).
func runSDFLoads(dev flash.Device, fs *sdf.FS, o sdfLoadOptions) ([]sdfRow, error) {
	g := fs.Layout().Geometry
	if len(o.Channels) == 0 {
		for c := 1; c < g.Channels; c *= 2 {
			o.Channels = append(o.Channels, c)
		}
		o.Channels = append(o.Channels, g.Channels)
	}
	for _, c := range o.Channels {
		if c < 1 || c > g.Channels {
			return nil, base.InvalidArgumentf("sdf: bench channel count %d of %d", c, g.Channels)
		}
	}
	zoneBytes := base.Bytes(g.DiesPerChannel * fs.Layout().DataPagesPerBlock() * g.PageSize)
	perChannel := base.Bytes(g.BlocksPerDie) * zoneBytes
	if o.BytesPerChannel == 0 {
		o.BytesPerChannel = min(perChannel/4, 16*base.MiB)
	}
	if o.BytesPerChannel > perChannel/2 {
		return nil, base.InvalidArgumentf("sdf: bench needs %s per channel, a channel holds %s", o.BytesPerChannel, perChannel)
	}
	if o.RequestBytes == 0 {
		o.RequestBytes = zoneBytes
	}
	if len(o.RandomReadBytes) == 0 {
		o.RandomReadBytes = []base.Bytes{8 * base.KiB, 16 * base.KiB, 64 * base.KiB}
	}
	if o.RandomReads == 0 {
		o.RandomReads = 200
	}
	rng := rand.New(rand.NewSource(o.Seed))
	payload := make([]byte, o.RequestBytes)
	rng.Read(payload)
	var rows []sdfRow
	size := int64(o.BytesPerChannel)

	writeAll := func(prefix string, k int) (time.Duration, error) {
		var wg sync.WaitGroup
		errs := make([]error, k)
		start := time.Now()
		for c := 0; c < k; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				f, err := fs.CreateOn(fmt.Sprintf("%s/c%d", prefix, c), sdf.LifetimeShort, c)
				if err != nil {
					errs[c] = err
					return
				}
				for off := int64(0); off < size; off += int64(len(payload)) {
					n := min(int64(len(payload)), size-off)
					if _, err := f.Write(payload[:n]); err != nil {
						errs[c] = err
						return
					}
				}
				errs[c] = f.Close()
			}(c)
		}
		wg.Wait()
		el := time.Since(start)
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		return el, nil
	}
	removeAll := func(prefix string, k int) {
		for c := 0; c < k; c++ {
			_ = fs.Remove(fmt.Sprintf("%s/c%d", prefix, c))
		}
	}
	// Sequential writes against channels.
	for _, k := range o.Channels {
		el, err := writeAll("bench/w", k)
		if err != nil {
			return rows, err
		}
		rows = append(rows, sdfRow{Test: "seq-write", Channels: k, Request: o.RequestBytes, Bytes: int64(k) * size, Elapsed: el})
		removeAll("bench/w", k)
	}
	// One file per channel for the reads.
	if _, err := writeAll("bench/r", g.Channels); err != nil {
		return rows, err
	}
	defer removeAll("bench/r", g.Channels)
	files := make([]*sdf.File, g.Channels)
	for c := range files {
		f, err := fs.OpenFile(fmt.Sprintf("bench/r/c%d", c))
		if err != nil {
			return rows, err
		}
		defer f.Close()
		files[c] = f
	}
	// Layer reads against channels, each followed by a raw device read of
	// the same pages. A corruption is counted and the read goes on.
	var corrupt atomic.Int64
	readAt := func(f *sdf.File, buf []byte, off int64) error {
		_, err := f.ReadAt(buf, off)
		if base.IsCorruption(err) {
			corrupt.Add(1)
			return nil
		}
		return err
	}
	seqRead := func(k int, test string, readAhead base.Bytes) error {
		for _, f := range files[:k] {
			if err := f.SetReadAhead(readAhead); err != nil {
				return err
			}
		}
		corrupt.Store(0)
		if o.Profile != "" && k == g.Channels && test == "seq-read" {
			stop, err := startCPUProfile(o.Profile)
			if err != nil {
				return err
			}
			defer stop()
		}
		cpu0, err := processCPU()
		if err != nil {
			return err
		}
		el, err := parallelReads(k, func(c int, buf []byte) error {
			for off := int64(0); off < size; off += int64(len(buf)) {
				n := min(int64(len(buf)), size-off)
				if err := readAt(files[c], buf[:n], off); err != nil {
					return err
				}
			}
			return nil
		}, int(o.RequestBytes))
		if err != nil {
			return err
		}
		cpu1, err := processCPU()
		if err != nil {
			return err
		}
		rows = append(rows, sdfRow{Test: test, Channels: k, Request: o.RequestBytes, Bytes: int64(k) * size,
			Elapsed: el, Errors: corrupt.Load(), CPU: cpu1 - cpu0})
		return nil
	}
	for _, k := range o.Channels {
		// Without read-ahead (each request waits for the last), then with
		// it (sdf.File.SetReadAhead: the next request is read while the
		// reader handles the last), then the raw read of the same pages.
		if !o.NoPlainRead {
			if err := seqRead(k, "seq-read-plain", 0); err != nil {
				return rows, err
			}
		}
		if err := seqRead(k, "seq-read", o.RequestBytes); err != nil {
			return rows, err
		}
		cpu0, err := processCPU()
		if err != nil {
			return rows, err
		}
		rel, err := rawRead(dev, fs, files[:k])
		if err != nil {
			return rows, err
		}
		cpu1, err := processCPU()
		if err != nil {
			return rows, err
		}
		rows = append(rows, sdfRow{Test: "raw-read", Channels: k, Request: base.Bytes(g.PageSize), Bytes: int64(k) * size,
			Elapsed: rel, CPU: cpu1 - cpu0})
	}
	// Random reads on every channel (Table 4).
	for _, rs := range o.RandomReadBytes {
		req := int64(rs)
		if req > size {
			continue
		}
		seeds := make([]int64, g.Channels)
		for c := range seeds {
			seeds[c] = rng.Int63()
		}
		corrupt.Store(0)
		el, err := parallelReads(g.Channels, func(c int, buf []byte) error {
			r := rand.New(rand.NewSource(seeds[c]))
			for i := 0; i < o.RandomReads; i++ {
				off := r.Int63n(size/req) * req
				if err := readAt(files[c], buf, off); err != nil {
					return err
				}
			}
			return nil
		}, int(req))
		if err != nil {
			return rows, err
		}
		rows = append(rows, sdfRow{Test: "rand-read", Channels: g.Channels, Request: rs,
			Bytes: int64(g.Channels) * int64(o.RandomReads) * req, Elapsed: el, Errors: corrupt.Load()})
	}
	return rows, nil
}

func parallelReads(k int, fn func(c int, buf []byte) error, bufBytes int) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, k)
	bufs := make([][]byte, k)
	for c := range bufs {
		bufs[c] = make([]byte, bufBytes)
		// Touch every page of the buffer before the clock starts: a
		// reader's buffer is resident, as the raw read's page buffer is,
		// so the first read into it does not pay the kernel's page
		// faults (about half the bytes of a sequential pass otherwise).
		for i := 0; i < len(bufs[c]); i += 4096 {
			bufs[c][i] = 1
		}
	}
	start := time.Now()
	for c := 0; c < k; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			errs[c] = fn(c, bufs[c])
		}(c)
	}
	wg.Wait()
	el := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return el, err
		}
	}
	return el, nil
}

// rawRead reads the physical pages of files straight from the device, one
// goroutine per die (the device's full parallelism, no verification), and
// returns the time taken: the reference for the layer's read throughput.
func rawRead(dev flash.Device, fs *sdf.FS, files []*sdf.File) (time.Duration, error) {
	g := fs.Layout().Geometry
	perDie := map[flash.DieAddr][]flash.PageAddr{}
	for _, f := range files {
		for _, a := range fs.DataPages(f) {
			perDie[a.DieAddr()] = append(perDie[a.DieAddr()], a)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for _, list := range perDie {
		wg.Add(1)
		go func(list []flash.PageAddr) {
			defer wg.Done()
			data := make([]byte, g.PageSize)
			oob := make([]byte, g.OOBSize)
			for _, a := range list {
				if _, err := dev.Read(a, data, oob); err != nil && !isMediaError(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}(list)
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// isMediaError is a read error the raw read counts as the medium's (and
// goes on): what the layer above would verify and repair.
func isMediaError(err error) bool {
	return errors.Is(err, flash.ErrUncorrectable) || errors.Is(err, flash.ErrDieFailed) ||
		errors.Is(err, flash.ErrBadBlock) || errors.Is(err, base.ErrCorruption)
}

// sdfOverwriteResult is the outcome of runSDFOverwrite.
type sdfOverwriteResult struct {
	Fill          float64 // live data / usable capacity
	UserBytes     int64   // bytes rewritten by the workload
	FlashBytes    int64   // bytes programmed meanwhile (data, GC, P2L, metadata)
	GCPages       int64
	Resets        int64
	Amplification float64 // all programmed bytes / user bytes
	// DataAmplification counts data pages only (user, padding, GC copies).
	DataAmplification float64
}

func (r sdfOverwriteResult) String() string {
	return fmt.Sprintf("fill %.0f%%: write amplification %.3f, data only %.3f (user %d B, flash %d B, GC pages %d, resets %d)",
		100*r.Fill, r.Amplification, r.DataAmplification, r.UserBytes, r.FlashBytes, r.GCPages, r.Resets)
}

// runSDFOverwrite fills fs with files up to fill (a fraction of usable
// capacity), then rewrites uniformly random chunkBytes-aligned ranges of
// them out of place (RewriteRange) until `rounds` times the live data was
// rewritten, and reports the write amplification of that phase.
func runSDFOverwrite(fs *sdf.FS, fill float64, chunkBytes base.Bytes, rounds float64, seed int64) (sdfOverwriteResult, error) {
	if fill <= 0 || fill >= 1 || chunkBytes < base.Bytes(fs.Layout().Geometry.PageSize) || rounds <= 0 {
		return sdfOverwriteResult{}, base.InvalidArgumentf("sdf: overwrite bench fill %g chunk %s rounds %g", fill, chunkBytes, rounds)
	}
	rng := rand.New(rand.NewSource(seed))
	st0 := fs.Stats()
	fileBytes := int64(16 * chunkBytes)
	nfiles := int(float64(st0.Usable) * fill / float64(fileBytes))
	buf := make([]byte, fileBytes)
	for i := 0; i < nfiles; i++ {
		rng.Read(buf)
		f, err := fs.Create(fmt.Sprintf("ow/%d", i), sdf.LifetimeNone)
		if err != nil {
			return sdfOverwriteResult{}, err
		}
		if _, err := f.Write(buf); err != nil {
			return sdfOverwriteResult{}, err
		}
		if err := f.Close(); err != nil {
			return sdfOverwriteResult{}, err
		}
	}
	st1 := fs.Stats()
	chunk := make([]byte, chunkBytes)
	total := int64(rounds * float64(int64(nfiles)*fileBytes))
	var user int64
	for user < total {
		rng.Read(chunk)
		name := fmt.Sprintf("ow/%d", rng.Intn(nfiles))
		off := rng.Int63n(fileBytes/int64(chunkBytes)) * int64(chunkBytes)
		if err := fs.RewriteRange(name, off, chunk); err != nil {
			return sdfOverwriteResult{}, err
		}
		user += int64(chunkBytes)
	}
	st2 := fs.Stats()
	r := sdfOverwriteResult{
		Fill:       float64(int64(nfiles)*fileBytes) / float64(st0.Usable),
		UserBytes:  user,
		FlashBytes: st2.FlashBytes - st1.FlashBytes,
		GCPages:    st2.GCPages - st1.GCPages,
		Resets:     st2.Resets - st1.Resets,
	}
	r.Amplification = float64(r.FlashBytes) / float64(r.UserBytes)
	r.DataAmplification = float64((st2.DataPages-st1.DataPages)*int64(fs.Layout().Geometry.PageSize)) / float64(r.UserBytes)
	return r, nil
}

// sdfIdentifyResult compares the lost-data identifiers on one die.
type sdfIdentifyResult struct {
	Die              flash.DieAddr
	Ranges           int
	Entrustment      sdf.IdentifyStats // CDR*: block-level P2L entrustment
	ScanOne, ScanAll sdf.IdentifyStats // IDR (one worker) and CDR (ScanWorkers) scans
	AgreeEntrustScan bool
	ScanWorkers      int
}

func (r sdfIdentifyResult) String() string {
	return fmt.Sprintf("%s: %d ranges; %s; IDR %s; CDR %s; agree=%t", r.Die, r.Ranges, r.Entrustment, r.ScanOne, r.ScanAll, r.AgreeEntrustScan)
}

// runSDFIdentify runs the three identifiers on die d of fs (the die need not
// have failed: they list what would be lost) and checks they agree.
func runSDFIdentify(fs *sdf.FS, d flash.DieAddr) (sdfIdentifyResult, error) {
	r := sdfIdentifyResult{Die: d}
	ent, st, err := fs.LostRanges(d)
	if err != nil {
		return r, err
	}
	r.Entrustment, r.Ranges = st, len(ent)
	idr, one, err := fs.IdentifyScan(d, 1, reparo.All)
	if err != nil {
		return r, err
	}
	r.ScanOne = one
	all, st, err := fs.LostRangesScan(d)
	if err != nil {
		return r, err
	}
	r.ScanAll, r.ScanWorkers = st, st.Workers
	r.AgreeEntrustScan = fmt.Sprint(ent) == fmt.Sprint(all) && fmt.Sprint(idr) == fmt.Sprint(all)
	return r, nil
}

// runSDFSyncedAppends appends n records of recordBytes to one file, syncing
// after each (a write-ahead log), and returns the write amplification of
// the run (all programmed bytes / appended bytes).
func runSDFSyncedAppends(fs *sdf.FS, recordBytes base.Bytes, n int) (float64, error) {
	if recordBytes <= 0 || n <= 0 {
		return 0, base.InvalidArgumentf("sdf: synced-append bench of %d x %s", n, recordBytes)
	}
	st0 := fs.Stats()
	f, err := fs.Create("bench/wal", sdf.LifetimeShort)
	if err != nil {
		return 0, err
	}
	rec := make([]byte, recordBytes)
	for i := 0; i < n; i++ {
		rec[0] = byte(i)
		if _, err := f.Write(rec); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	st1 := fs.Stats()
	err = fs.Remove("bench/wal")
	return float64(st1.FlashBytes-st0.FlashBytes) / float64(int64(n)*int64(recordBytes)), err
}

// startCPUProfile writes the process's CPU profile to path until the
// returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
