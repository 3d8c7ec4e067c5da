package flash

import "sync"

// store is the backing medium of an Emulator: it holds the raw cell content
// of every programmed page (data followed by OOB, PageSize+OOBSize bytes) and
// the device's state record. It knows nothing about NAND rules; the Emulator
// enforces them and calls the store only for legal operations.
//
// Concurrency: the Emulator serializes calls that touch one die (per-die
// lock), and pages of different dies never share storage, so a store only
// has to be safe for concurrent calls on different pages. SaveState and
// LoadState are serialized by the Emulator's state lock.
type store interface {
	// ReadPage fills buf (len PageSize+OOBSize) with the stored page. It
	// returns a corruption error if the medium itself no longer verifies.
	ReadPage(page int64, buf []byte) error
	// WritePage stores buf (len PageSize+OOBSize) as the content of page.
	WritePage(page int64, buf []byte) error
	// EraseBlock forgets the pages [first, first+n).
	EraseBlock(first int64, n int) error
	// LoadState returns every stored copy of the framed state record (none
	// if the device is new); the caller assembles the newest record from
	// the copies' units (stateunit.Assemble).
	LoadState() ([][]byte, error)
	// SaveState durably writes the framed record to every copy, one copy
	// at a time, so a crash during the write tears at most one copy.
	SaveState(framed []byte) error
	// Programmed reports whether page holds a programmed page (used to
	// rebuild write pointers after an unclean shutdown).
	Programmed(page int64) (bool, error)
	// Sync makes every completed WritePage and EraseBlock durable.
	Sync() error
	// Persistent reports whether the store survives the process (so that
	// saving the state record is worth its cost).
	Persistent() bool
	Close() error
}

// memStore keeps pages in memory, allocated per block on the block's first
// program (so a large, mostly empty geometry costs little) and reused after
// erase. The Emulator never reads an erased page from the store: it answers
// 0xFF from the block state.
type memStore struct {
	pageBytes     int
	pagesPerBlock int
	blocks        [][][]byte // [flat block][page]; nil until first programmed

	mu    sync.Mutex // guards state
	state []byte
}

var _ store = (*memStore)(nil)

func newMemStore(g Geometry) *memStore {
	return &memStore{
		pageBytes:     g.PageSize + g.OOBSize,
		pagesPerBlock: g.PagesPerBlock,
		blocks:        make([][][]byte, int64(g.Dies())*int64(g.BlocksPerDie)),
	}
}

func (s *memStore) page(page int64) []byte {
	b := s.blocks[page/int64(s.pagesPerBlock)]
	if b == nil {
		return nil
	}
	return b[page%int64(s.pagesPerBlock)]
}

func (s *memStore) ReadPage(page int64, buf []byte) error {
	p := s.page(page)
	if p == nil {
		// Never programmed in this process (cannot happen through the
		// Emulator); behave like erased cells.
		fill(buf, 0xFF)
		return nil
	}
	copy(buf, p)
	return nil
}

func (s *memStore) WritePage(page int64, buf []byte) error {
	fb, i := page/int64(s.pagesPerBlock), page%int64(s.pagesPerBlock)
	if s.blocks[fb] == nil {
		s.blocks[fb] = make([][]byte, s.pagesPerBlock)
	}
	p := s.blocks[fb][i]
	if p == nil {
		p = make([]byte, s.pageBytes)
		s.blocks[fb][i] = p
	}
	copy(p, buf)
	return nil
}

func (s *memStore) EraseBlock(first int64, n int) error {
	for i := first; i < first+int64(n); i++ {
		if p := s.page(i); p != nil {
			fill(p, 0xFF)
		}
	}
	return nil
}

func (s *memStore) LoadState() ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		return nil, nil
	}
	return [][]byte{append([]byte(nil), s.state...)}, nil
}

func (s *memStore) Programmed(page int64) (bool, error) { return s.page(page) != nil, nil }

func (s *memStore) SaveState(rec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = append(s.state[:0], rec...)
	return nil
}

func (s *memStore) Sync() error      { return nil }
func (s *memStore) Persistent() bool { return false }
func (s *memStore) Close() error     { return nil }

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// discardStore keeps no page content: it is the backend of NewDiscard, for
// simulations that need the device's rules, state, wear, failures and
// timing but not its data (the fleet simulator, throughput models). Reads
// of programmed pages return zeros; the state record lives in memory.
type discardStore struct{ memStore }

var _ store = (*discardStore)(nil)

func (s *discardStore) ReadPage(_ int64, buf []byte) error { fill(buf, 0); return nil }
func (s *discardStore) WritePage(_ int64, _ []byte) error  { return nil }
func (s *discardStore) EraseBlock(_ int64, _ int) error    { return nil }
func (s *discardStore) Programmed(_ int64) (bool, error)   { return false, nil }

// NewDiscard returns a device that enforces the NAND rules and keeps the
// device state, wear, failures, statistics and timing, but stores no page
// content: programmed pages read back as zeros (before the error model). It
// is for simulations at a scale where content does not fit in memory.
func NewDiscard(g Geometry, opts Options) (*Emulator, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := opts.validate(g); err != nil {
		return nil, err
	}
	return newEmulator(g, opts, &discardStore{}, nil)
}
