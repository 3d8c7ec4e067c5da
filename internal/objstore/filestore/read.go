package filestore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/objstore"
)

var (
	_ objstore.BufferGetter  = (*Store)(nil)
	_ objstore.RangeReader   = (*Store)(nil)
	_ objstore.SpaceReporter = (*Store)(nil)
)

// GetInto implements objstore.BufferGetter: a packed member is read into alloc's
// buffer, any other file as Get reads it.
func (s *Store) GetInto(name string, alloc func(n int) []byte) ([]byte, error) {
	if err := objstore.ValidName(name); err != nil {
		return nil, err
	}
	key, member, ok := packedName(name)
	if !ok || isIndexName(name) {
		return s.Get(name) // small; perhaps of the format before index members
	}
	var out []byte
	found, err := s.readPack(key, func(p *pack) error {
		e, ok := p.live[member]
		if !ok {
			return fmt.Errorf("filestore: %s: %w", name, fs.ErrNotExist)
		}
		out = alloc(int(e.n))
		if _, err := p.f.ReadAt(out, e.off); err != nil {
			return fmt.Errorf("filestore: read %s: %w", name, err)
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("filestore: %s: %w", name, fs.ErrNotExist)
	}
	return out, err
}

// GetRange implements objstore.RangeReader.
func (s *Store) GetRange(name string, off, n int64) ([]byte, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	if key, member, ok := packedName(name); ok {
		b, err := s.packGet(name, key, member, off, n)
		if !isIndexName(name) || !errors.Is(err, fs.ErrNotExist) {
			return b, err
		}
		// The copy of the format before index members, if any.
	}
	f, err := s.fs.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	return buf[:got], nil
}

// Space implements objstore.SpaceReporter with statfs: the file system's size and
// the bytes an unprivileged writer may still use.
func (s *Store) Space() (capacity, free base.Bytes, err error) {
	capacity, free, err = s.fs.Space(s.root)
	if err != nil {
		return 0, 0, fmt.Errorf("filestore: statfs: %w", err)
	}
	return capacity, free, nil
}
