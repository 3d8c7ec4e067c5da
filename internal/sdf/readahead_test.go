package sdf

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestReadAhead reads files in order with read-ahead on: the bytes are the
// file's, later requests are served from the read-ahead, a range rewritten
// after it was read ahead reads as rewritten, a persistent corruption in a
// range read ahead is still reported to the caller, and a read elsewhere
// drops the read-ahead.
func TestReadAhead(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	dev, fs := newMem(t, small(), Options{ReadAheadBytes: 64 * base.KiB})
	defer fs.Close()
	ps := fs.l.Geometry.PageSize
	req := 4 * ps
	const chunks = 12
	data := randBytes(rng, chunks*req+ps/2)
	writeFile(t, fs, "x", LifetimeNone, data)
	f, err := fs.OpenFile("x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, req)
	read := func(chunk int) error {
		t.Helper()
		n, err := f.ReadAt(buf, int64(chunk*req))
		if err == nil && n != req {
			t.Fatalf("chunk %d: %d bytes", chunk, n)
		}
		return err
	}
	// In order: every chunk from the second on comes from a read-ahead
	// (the first read, at offset 0, starts one).
	for c := 0; c < chunks; c++ {
		if err := read(c); err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
		mustEqual(t, fmt.Sprintf("chunk %d", c), buf, data[c*req:(c+1)*req])
	}
	if got := fs.Stats().ReadAheads; got != chunks-1 {
		t.Fatalf("%d reads served ahead, want %d", got, chunks-1)
	}
	// Rewritten after it was read ahead: chunk 2 is read ahead when chunk 1
	// is read, then rewritten.
	for c := 0; c < 2; c++ {
		if err := read(c); err != nil {
			t.Fatal(err)
		}
	}
	fresh := randBytes(rng, req)
	if err := fs.RewriteRange("x", int64(2*req), fresh); err != nil {
		t.Fatal(err)
	}
	copy(data[2*req:], fresh)
	if err := read(2); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rewritten chunk", buf, fresh)
	// A persistent flip in chunk 4, read ahead when chunk 3 is read: the
	// caller's read of chunk 4 reports it.
	fs.mu.Lock()
	ino := fs.files["x"]
	pg := uint64(4 * req / ps)
	e, _ := ino.m.Find(pg)
	z := fs.zones.All[e.Zone]
	addr := fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+int(pg-e.FilePage))
	fs.mu.Unlock()
	dev.Faults().FlipBit(addr, 17, true /* persistent */)
	if err := read(3); err != nil {
		t.Fatal(err)
	}
	var cerr *CorruptionError
	if err := read(4); !errors.As(err, &cerr) || cerr.Off != int64(pg)*int64(ps) {
		t.Fatalf("chunk 4 with a persistent flip: %v", err)
	}
	// A read elsewhere, then in order again from the start.
	if err := read(9); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "chunk 9", buf, data[9*req:10*req])
	for c := 0; c < 4; c++ {
		if err := read(c); err != nil {
			t.Fatal(err)
		}
		mustEqual(t, fmt.Sprintf("chunk %d again", c), buf, data[c*req:(c+1)*req])
	}
}

// TestReadAheadConcurrentReaders: several goroutines read one File in
// order, each its own range (so they take each other's read-aheads or drop
// them): every byte read is the file's.
func TestReadAheadConcurrentReaders(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	_, fs := newMem(t, small(), Options{ReadAheadBytes: 64 * base.KiB})
	defer fs.Close()
	req := 2 * fs.l.Geometry.PageSize
	data := randBytes(rng, 64*req)
	writeFile(t, fs, "x", LifetimeNone, data)
	f, err := fs.OpenFile("x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, req)
			for c := w * 16; c < (w+1)*16; c++ {
				if _, err := f.ReadAt(buf, int64(c*req)); err != nil {
					errs <- err
					return
				}
				if string(buf) != string(data[c*req:(c+1)*req]) {
					errs <- fmt.Errorf("reader %d: chunk %d differs", w, c)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestReadAheadAtEnd: the read-ahead of the range that runs past the end
// of the file is cut there and serves the last, short read (with io.EOF);
// once the file grew, a range cut at the old end is not used and the read
// returns the new bytes.
func TestReadAheadAtEnd(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	_, fs := newMem(t, small(), Options{ReadAheadBytes: 64 * base.KiB})
	defer fs.Close()
	ps := fs.l.Geometry.PageSize
	req := 3 * ps
	data := randBytes(rng, 2*req+ps/2)
	f, err := fs.Create("x", LifetimeNone)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, req)
	for c := 0; c < 2; c++ {
		if n, err := f.ReadAt(buf, int64(c*req)); err != nil || n != req {
			t.Fatalf("chunk %d: %d, %v", c, n, err)
		}
		mustEqual(t, fmt.Sprintf("chunk %d", c), buf, data[c*req:(c+1)*req])
	}
	if n, err := f.ReadAt(buf, int64(2*req)); err != io.EOF || n != ps/2 {
		t.Fatalf("last chunk: %d, %v; want %d, EOF", n, err, ps/2)
	}
	mustEqual(t, "last chunk", buf[:ps/2], data[2*req:])
	if got := fs.Stats().ReadAheads; got != 2 {
		t.Fatalf("%d reads served ahead, want 2", got)
	}
	// Read in order again; the file grows while the last range, cut at the
	// old end, is read ahead.
	for c := 0; c < 2; c++ {
		if _, err := f.ReadAt(buf, int64(c*req)); err != nil {
			t.Fatal(err)
		}
	}
	more := randBytes(rng, req)
	if _, err := f.Write(more); err != nil {
		t.Fatal(err)
	}
	data = append(data, more...)
	if n, err := f.ReadAt(buf, int64(2*req)); err != nil || n != req {
		t.Fatalf("last chunk after the file grew: %d, %v", n, err)
	}
	mustEqual(t, "last chunk after the file grew", buf, data[2*req:3*req])
}

// TestReadAheadKeptAcrossFailedPage: a page of a read-ahead that fails
// (an uncorrectable read, so the worker does not re-read it) is read again
// alone by the caller, and a transient flip is absorbed by the channel
// worker's re-read: both ranges are still served from their read-ahead,
// and the device reads every page once plus one read for each fault (a
// dropped read-ahead would read its whole range again; the detector's
// probes after the uncorrectable read aside).
func TestReadAheadKeptAcrossFailedPage(t *testing.T) {
	rng := testseed.Rand(t, "SDF_SEED")
	dev, fs := newMem(t, small(), Options{ReadAheadBytes: 64 * base.KiB})
	defer fs.Close()
	ps := fs.l.Geometry.PageSize
	const pagesPerReq, chunks = 4, 6
	req := pagesPerReq * ps
	data := randBytes(rng, chunks*req)
	writeFile(t, fs, "x", LifetimeNone, data)
	f, err := fs.OpenFile("x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addrOf := func(pg uint64) flash.PageAddr {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		e, _ := fs.files["x"].m.Find(pg)
		z := fs.zones.All[e.Zone]
		return fs.l.DataPageAddr(z.ID, z.Dies, e.ZonePage+int(pg-e.FilePage))
	}
	// Chunks 2 and 3 are first read by read-ahead (chunk 0 is read by the
	// caller, and each read starts the read-ahead of the next chunk).
	dev.Faults().FailRead(addrOf(uint64(2*pagesPerReq + 1)))
	dev.Faults().FlipBit(addrOf(uint64(3*pagesPerReq+2)), 100, false /* transient */)
	reads := func() int64 {
		var n int64
		for _, r := range fs.Stats().ChannelReads {
			n += r
		}
		return n
	}
	before, st0 := reads(), fs.Stats()
	buf := make([]byte, req)
	for c := 0; c < chunks; c++ {
		if n, err := f.ReadAt(buf, int64(c*req)); err != nil || n != req {
			t.Fatalf("chunk %d: %d, %v", c, n, err)
		}
		mustEqual(t, fmt.Sprintf("chunk %d", c), buf, data[c*req:(c+1)*req])
	}
	st := fs.Stats()
	if got := st.ReadAheads - st0.ReadAheads; got != chunks-1 {
		t.Fatalf("%d reads served ahead, want %d", got, chunks-1)
	}
	if got, want := reads()-before-(st.Probes-st0.Probes), int64(chunks*pagesPerReq+2); got != want {
		t.Fatalf("%d device reads, want %d (every page once, the failed page and the flipped page once more)", got, want)
	}
	if got := st.Transients - st0.Transients; got != 1 {
		t.Fatalf("%d transient flips absorbed, want 1", got)
	}
	if got := st.Corruptions - st0.Corruptions; got != 0 {
		t.Fatalf("%d corruptions returned, want 0", got)
	}
}
