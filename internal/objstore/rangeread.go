package objstore

import (
	"fmt"
	"io/fs"

	"github.com/flashmend/flashmend/internal/base"
)

// RangeReader is implemented by stores that can read part of a file. A
// reader that needs a few bytes of a larger file (one chunk's sums record
// out of a shared sums file) uses it, so that it touches, and is exposed to
// read errors for, only the bytes it reads, as a page read on flash is.
//
// GetRange returns the bytes [off, off+n) of name, fewer when the file ends
// first (none when it ends before off), corrupt or not. A missing file is an
// error wrapping fs.ErrNotExist.
type RangeReader interface {
	GetRange(name string, off, n int64) ([]byte, error)
}

// BufferGetter is implemented by stores that can read a file into a buffer
// the caller provides: GetInto returns what Get returns, in alloc(n) for
// a file of n bytes (alloc returns a slice of exactly n bytes).
type BufferGetter interface {
	GetInto(name string, alloc func(n int) []byte) ([]byte, error)
}

var (
	_ BufferGetter = (*FaultStore)(nil)
)

// GetInto implements BufferGetter, flipping bits of what it returns as Get
// does.
func (f *FaultStore) GetInto(name string, alloc func(n int) []byte) ([]byte, error) {
	var b []byte
	var err error
	if bg, ok := f.Store.(BufferGetter); ok {
		b, err = bg.GetInto(name, alloc)
	} else {
		b, err = f.Store.Get(name)
	}
	if err != nil || len(b) == 0 {
		return b, err
	}
	return f.inject(name, 0, b)
}

var (
	_ RangeReader = (*MemStore)(nil)
	_ RangeReader = (*SDFStore)(nil)
	_ RangeReader = (*FaultStore)(nil)
)

// getRange reads [off, off+n) of name through s's RangeReader, or by reading
// the whole file when s has none.
func getRange(s Store, name string, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, base.InvalidArgumentf("range [%d, +%d) of %s", off, n, name)
	}
	if rr, ok := s.(RangeReader); ok {
		return rr.GetRange(name, off, n)
	}
	b, err := s.Get(name)
	if err != nil {
		return nil, err
	}
	return clipRange(b, off, n), nil
}

// clipRange returns a copy of b[off:off+n] clipped to b's length.
func clipRange(b []byte, off, n int64) []byte {
	if off >= int64(len(b)) {
		return []byte{}
	}
	end := min(off+n, int64(len(b)))
	return append([]byte(nil), b[off:end]...)
}

// GetRange implements RangeReader.
func (m *MemStore) GetRange(name string, off, n int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[name]
	if !ok {
		return nil, fmt.Errorf("memstore: %s: %w", name, fs.ErrNotExist)
	}
	return clipRange(b, off, n), nil
}

// GetRange implements RangeReader: only the pages holding the range are read
// (raw content where they do not verify, as Get returns it).
func (s *SDFStore) GetRange(name string, off, n int64) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	st, err := s.fs.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	if off >= st.Size {
		return []byte{}, nil
	}
	n = min(n, st.Size-off)
	f, err := s.fs.OpenFile(name)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err == nil || (int64(got) == n && !base.IsCorruption(err)) {
		return buf, nil
	}
	if !base.IsCorruption(err) {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	raw, _, rerr := s.fs.ReadRaw(name, off, n)
	if rerr != nil {
		return nil, fmt.Errorf("sdfstore: raw read of %s after %v: %w", name, err, rerr)
	}
	return raw, nil
}

// GetRange implements RangeReader, flipping bits of only the bytes it
// returns (and, when persistent, of only those bytes in the stored file).
func (f *FaultStore) GetRange(name string, off, n int64) ([]byte, error) {
	b, err := getRange(f.Store, name, off, n)
	if err != nil || len(b) == 0 {
		return b, err
	}
	return f.inject(name, off, b)
}

var _ RangeWriter = (*MemStore)(nil)

// WriteAt implements RangeWriter. In memory every write is out of place (a
// new slice replaces the old), so a range past the end, or of a missing
// file, extends the file with zero bytes.
func (m *MemStore) WriteAt(name string, off int64, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if off < 0 {
		return base.InvalidArgumentf("memstore: write at %d of %s", off, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.files[name]
	next := make([]byte, max(int64(len(old)), off+int64(len(data))))
	copy(next, old)
	copy(next[off:], data)
	m.files[name] = next
	return nil
}
