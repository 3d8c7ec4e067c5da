package sdf

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"
)

// TestConcurrentWorkload runs writers, readers and removers at once on a
// nearly full device, so GC, zone resets and reads race; every read must
// return the bytes written (a file's content is derived from its name and
// generation) or a clean not-exist error. Run it with -race.
func TestConcurrentWorkload(t *testing.T) {
	seed := testSeed(t)
	_, fs := newMem(t, small(), Options{MaxOpenZones: 4, GCFreeZonesMin: 8})
	defer fs.Close()
	content := func(name string, gen, size int) []byte {
		r := rand.New(rand.NewSource(int64(len(name))*1_000_003 + int64(gen)))
		return randBytes(r, size)
	}
	type version struct{ gen, size int }
	var mu sync.Mutex
	current := map[string]version{} // last completed write of each file
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(w)))
			for i := 0; i < 40; i++ {
				name := fmt.Sprintf("w%d/f%d", w, rng.Intn(6))
				size := rng.Intn(150_000)
				data := content(name, i, size)
				f, err := fs.Create(name, Lifetime(rng.Intn(int(numLifetimes))))
				if err != nil {
					errc <- err
					return
				}
				for off := 0; off < size; {
					n := min(size-off, 1+rng.Intn(30_000))
					if _, err := f.Write(data[off : off+n]); err != nil {
						errc <- fmt.Errorf("write %s: %w", name, err)
						return
					}
					off += n
				}
				if err := f.Close(); err != nil {
					errc <- err
					return
				}
				mu.Lock()
				current[name] = version{i, size}
				mu.Unlock()
				if rng.Intn(3) == 0 {
					if err := fs.Remove(name); err != nil {
						errc <- err
						return
					}
					mu.Lock()
					delete(current, name)
					mu.Unlock()
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rwg.Add(1)
		go func(r int) {
			defer rwg.Done()
			rng := rand.New(rand.NewSource(seed + 100 + int64(r)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d/f%d", rng.Intn(4), rng.Intn(6))
				mu.Lock()
				v, ok := current[name]
				mu.Unlock()
				if !ok {
					continue
				}
				f, err := fs.OpenFile(name)
				if errors.Is(err, ErrNotExist) {
					continue
				}
				if err != nil {
					errc <- err
					return
				}
				// The writer may have replaced the file since: accept any
				// generation whose content matches.
				buf := make([]byte, f.Size())
				_, err = f.ReadAt(buf, 0)
				f.Close()
				if err != nil && len(buf) > 0 {
					errc <- fmt.Errorf("read %s: %w", name, err)
					return
				}
				if len(buf) == v.size && !bytes.Equal(buf, content(name, v.gen, v.size)) {
					match := false
					for g := 0; g < 60 && !match; g++ {
						match = bytes.Equal(buf, content(name, g, len(buf)))
					}
					if !match {
						errc <- fmt.Errorf("%s: content of no generation", name)
						return
					}
				}
			}
		}(r)
	}
	// A collector runs GC on whatever zone is the best victim, whether or
	// not space is short, so GC always races with the readers and writers.
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := fs.gcOnce(); err != nil {
				errc <- fmt.Errorf("gc: %w", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for name, v := range current {
		mustEqual(t, name, readFile(t, fs, name), content(name, v.gen, v.size))
	}
	st := fs.Stats()
	t.Log(st)
	if st.GCRuns == 0 {
		t.Fatal("no GC ran: the test does not race GC with reads")
	}
}

// TestCloseRacesHandleClose: FS.Close flushes every file open for writing
// while their handles close at the same time (a node shutting down while
// a writer finishes). Regression: both flushed the same buffer, and the
// later one sliced a buffer the handle's Close had dropped (slice bounds
// out of range in flushFile, TestQuickRuns/chameleon-live in CI).
func TestCloseRacesHandleClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		_, fs := newMem(t, small(), Options{})
		page := make([]byte, fs.l.Geometry.PageSize)
		var files []*File
		for i := 0; i < 8; i++ {
			f, err := fs.Create(fmt.Sprintf("f%d", i), LifetimeShort)
			if err != nil {
				t.Fatal(err)
			}
			// Whole pages and a partial one, all buffered.
			if _, err := f.Write(append(append([]byte(nil), page...), page[:100+i]...)); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		var wg sync.WaitGroup
		for _, f := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// ErrClosed once FS.Close won: either is fine, a
				// panic or a race is not.
				_ = f.Close()
			}()
		}
		_ = fs.Close()
		wg.Wait()
	}
}
