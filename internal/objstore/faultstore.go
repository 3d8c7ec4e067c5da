package objstore

import (
	"fmt"
	"math"
	"math/rand"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
)

// FaultStore wraps a Store and injects bit errors on reads at a configured
// uncorrectable bit error rate, as in DIRECT's evaluation (000 section 5):
// every bit read flips with probability UBER. Transient flips change only the
// returned bytes; persistent flips are also written into the stored file.
type FaultStore struct {
	Store
	mu         sync.Mutex
	rng        *rand.Rand
	uber       float64
	persistent bool
	flips      int64
}

var _ Store = (*FaultStore)(nil)

// NewFaultStore wraps inner with fault injection off, drawing flips from a
// generator seeded with seed.
func NewFaultStore(inner Store, seed int64) *FaultStore {
	return &FaultStore{Store: inner, rng: rand.New(rand.NewSource(seed))}
}

// SetUBER sets the bit error rate (0 turns injection off).
func (f *FaultStore) SetUBER(rate float64, persistent bool) error {
	if math.IsNaN(rate) || rate < 0 || rate > 0.01 {
		return base.InvalidArgumentf("faultstore: UBER %g outside [0, 0.01]", rate)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uber, f.persistent = rate, persistent
	return nil
}

// Flips is the number of bits flipped so far.
func (f *FaultStore) Flips() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flips
}

func (f *FaultStore) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("uber=%g persistent=%v flips=%d", f.uber, f.persistent, f.flips)
}

// Get implements Store, flipping bits of what it returns.
func (f *FaultStore) Get(name string) ([]byte, error) {
	b, err := f.Store.Get(name)
	if err != nil || len(b) == 0 {
		return b, err
	}
	return f.inject(name, 0, b)
}

// inject flips bits of b, which holds the file's bytes from byte offset off;
// persistent flips are also written into the stored file.
func (f *FaultStore) inject(name string, off int64, b []byte) ([]byte, error) {
	positions := f.draw(int64(len(b)) * 8)
	persistent := f.isPersistent()
	for _, bit := range positions {
		b[bit/8] ^= 1 << (bit % 8)
		if persistent {
			if err := f.Store.FlipBits(name, off*8+bit, 1); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

func (f *FaultStore) isPersistent() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.persistent
}

// draw picks the flipped bit positions among n bits: gaps between flips are
// geometric with parameter UBER, which is exact for independent flips.
func (f *FaultStore) draw(n int64) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uber == 0 {
		return nil
	}
	var out []int64
	pos := int64(-1)
	for {
		gap := int64(math.Floor(math.Log(1-f.rng.Float64())/math.Log1p(-f.uber))) + 1
		if gap <= 0 || pos+gap >= n {
			break
		}
		pos += gap
		out = append(out, pos)
	}
	f.flips += int64(len(out))
	return out
}

// WriteAt implements RangeWriter by passing the rewrite to the inner store
// (writes are not subject to injected flips).
func (f *FaultStore) WriteAt(name string, off int64, data []byte) error {
	if rw, ok := f.Store.(RangeWriter); ok {
		return rw.WriteAt(name, off, data)
	}
	return fmt.Errorf("%s: %w", f.Store.Name(), ErrRangeUnsupported)
}

// WriteFresh implements FreshWriter by passing the write to the inner store.
func (f *FaultStore) WriteFresh(name string, off int64, data []byte) error {
	if fw, ok := f.Store.(FreshWriter); ok {
		return fw.WriteFresh(name, off, data)
	}
	return fmt.Errorf("%s: %w", f.Store.Name(), ErrRangeUnsupported)
}

// Create implements Creator by passing the write to the inner store (Put
// when it has no Create).
func (f *FaultStore) Create(name string, data []byte) error {
	if cr, ok := f.Store.(Creator); ok {
		return cr.Create(name, data)
	}
	return f.Store.Put(name, data)
}

var _ Batcher = (*FaultStore)(nil)

// NewBatch implements Batcher by passing the batch to the inner store (nil,
// a batch of immediate writes to NewBatch, when it cannot batch). Writes
// are not subject to injected flips.
func (f *FaultStore) NewBatch() Batch {
	if b, ok := f.Store.(Batcher); ok {
		return b.NewBatch()
	}
	return nil
}

// PutCopy implements CopyPlacer by passing the write to the inner store
// (Put when it does not place copies).
func (f *FaultStore) PutCopy(name string, data []byte, group string, i int) error {
	if cp, ok := f.Store.(CopyPlacer); ok {
		return cp.PutCopy(name, data, group, i)
	}
	return f.Store.Put(name, data)
}

var _ DirDeleter = (*FaultStore)(nil)

// DeleteDir implements DirDeleter by passing the delete to the inner store
// (deleting the listed names one by one when it has no DeleteDir).
func (f *FaultStore) DeleteDir(prefix string) error {
	if dd, ok := f.Store.(DirDeleter); ok {
		return dd.DeleteDir(prefix)
	}
	names, err := f.Store.List(prefix)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := f.Store.Delete(n); err != nil {
			return err
		}
	}
	return nil
}
