package objstore

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
)

// MemStore is an in-memory Store for tests.
type MemStore struct {
	mu       sync.Mutex
	files    map[string][]byte
	capacity base.Bytes // 0: 1 GiB
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore { return &MemStore{files: map[string][]byte{}} }

// Name implements Store.
func (m *MemStore) Name() string { return "mem" }

// Put implements Store.
func (m *MemStore) Put(name string, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if grow := base.Bytes(len(data) - len(m.files[name])); grow > 0 && m.usedLocked()+grow > m.capacityLocked() {
		return base.NoSpaceErrorf("memstore: put %s: no space left (%s of %s used)", name, m.usedLocked(), m.capacityLocked())
	}
	m.files[name] = append([]byte(nil), data...)
	return nil
}

// Get implements Store.
func (m *MemStore) Get(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[name]
	if !ok {
		return nil, fmt.Errorf("memstore: %s: %w", name, fs.ErrNotExist)
	}
	return append([]byte(nil), b...), nil
}

// Delete implements Store.
func (m *MemStore) Delete(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, name)
	return nil
}

// List implements Store.
func (m *MemStore) List(prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for n := range m.files {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// FlipBits implements Store.
func (m *MemStore) FlipBits(name string, bitOffset int64, count int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[name]
	if !ok {
		return fmt.Errorf("memstore: %s: %w", name, fs.ErrNotExist)
	}
	return InvertBits(b, bitOffset, count)
}

// Usage implements Store.
func (m *MemStore) Usage() (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Usage{CapacityBytes: m.capacityLocked(), UsedBytes: m.usedLocked()}, nil
}

// Close implements Store.
func (m *MemStore) Close() error { return nil }
