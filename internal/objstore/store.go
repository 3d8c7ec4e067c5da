package objstore

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
)

// Store is the node-local storage a node keeps its chunks, checksums and
// metadata files on. Names are slash-separated relative paths of printable
// ASCII. Implementations are safe for concurrent use.
type Store interface {
	// Name identifies the device behind the store in repair counters.
	Name() string
	// Put stores data under name, replacing any previous file atomically
	// and out of place (the old bytes are not overwritten), durably when the
	// store is configured to sync. NB: it keeps no reference to data once
	// it returns (the node hands a chunk's receive buffer back to a pool
	// then, wire.ChunkWrite); likewise Creator.Create.
	Put(name string, data []byte) error
	// Get returns the stored bytes, corrupt or not. A missing file is an
	// error wrapping fs.ErrNotExist.
	Get(name string) ([]byte, error)
	// Delete removes name; deleting a missing file is not an error.
	Delete(name string) error
	// List returns the names that start with prefix, sorted.
	List(prefix string) ([]string, error)
	// FlipBits inverts count consecutive bits of the stored file, starting
	// at bit offset bitOffset: persistent damage for fault injection.
	FlipBits(name string, bitOffset int64, count int) error
	// Usage reports the store's capacity and the bytes it holds.
	Usage() (Usage, error)
	Close() error
}

// DirDeleter is implemented by stores that can delete every file under a
// directory prefix at once (the plain-file store removes a blob's pack files
// whole, without a delete record per member).
type DirDeleter interface {
	// DeleteDir removes every name that starts with prefix, which ends in
	// "/"; a prefix that holds nothing is not an error.
	DeleteDir(prefix string) error
}

// RangeWriter is implemented by stores that can replace a byte range inside
// an existing file out of place (the old bytes are not overwritten; on SDF,
// sdf.FS.RewriteRange reprograms only the pages the range touches).
// WriteAt returns an error wrapping ErrRangeUnsupported when it cannot do it
// for this file (the caller then rewrites the whole file); a store may also
// accept a range past the end of the file (or of a missing file), extending
// it with zero bytes, where it can do so out of place.
type RangeWriter interface {
	WriteAt(name string, off int64, data []byte) error
}

// FreshWriter is implemented by stores that can write bytes into a range
// of a file that holds nothing there yet (past the file's end, a missing
// file being created, or only zero bytes: a sums slot never written) in
// place, without a new file. Nothing already written is overwritten: a
// range that holds a nonzero byte gets an error wrapping
// ErrRangeUnsupported, and the caller writes out of place. A crash may
// leave the range partly written, so it is used only for records that carry
// their own checksum (a sums record: a torn one does not verify, its chunk
// counts as corrupt and is repaired). Callers serialize the writers of one
// file.
type FreshWriter interface {
	WriteFresh(name string, off int64, data []byte) error
}

// Creator is implemented by stores that can write a file that does not
// exist yet in place (no temporary file and rename). A crash may leave the
// new file partly written, so it is used only for content checked against a
// checksum kept apart (a chunk's data, against its sums record, written
// after it). A name that exists is replaced out of place, as Put does.
type Creator interface {
	Create(name string, data []byte) error
}

// Batcher is implemented by stores that can group the fsyncs of in-place
// writes (group commit): the writes of a Batch are made durable together by
// its Commit, one fsync per file written, instead of one per write. A node
// stores a PUT's stream of chunks in one batch and acknowledges the stream
// only after Commit returned (durability before the acknowledgement, as
// with one sync per write).
type Batcher interface {
	// NewBatch starts a batch. A batch is used by one goroutine.
	NewBatch() Batch
}

// Batch is a group of in-place writes whose durability is deferred to
// Commit. Create and WriteFresh are Creator.Create and
// FreshWriter.WriteFresh (a store without one of them: Put, or an error
// wrapping ErrRangeUnsupported), except that on a store that syncs their
// bytes are durable only once Commit has returned nil; a crash before that
// may keep any part of them, as a crash in the middle of a write does (the
// content is checked against a checksum kept apart). What they write is
// visible to reads at once.
type Batch interface {
	Create(name string, data []byte) error
	WriteFresh(name string, off int64, data []byte) error
	// Commit makes every write of the batch durable. After an error no
	// write of the batch may be taken as durable.
	Commit() error
}

// NewBatch returns a batch of store's: its own (Batcher), or one whose
// writes are each durable when they return (Commit does nothing).
func NewBatch(store Store) Batch {
	if b, ok := store.(Batcher); ok {
		if batch := b.NewBatch(); batch != nil {
			return batch
		}
	}
	return immediateBatch{store}
}

// immediateBatch is the Batch of a store that cannot defer syncs: every
// write syncs (when the store does) before it returns.
type immediateBatch struct{ store Store }

func (b immediateBatch) Create(name string, data []byte) error {
	if cr, ok := b.store.(Creator); ok {
		return cr.Create(name, data)
	}
	return b.store.Put(name, data)
}

func (b immediateBatch) WriteFresh(name string, off int64, data []byte) error {
	if fw, ok := b.store.(FreshWriter); ok {
		return fw.WriteFresh(name, off, data)
	}
	return fmt.Errorf("%s: %w", b.store.Name(), ErrRangeUnsupported)
}

func (immediateBatch) Commit() error { return nil }

// CopyPlacer is implemented by stores on a device with failure domains of
// its own (an SDF store's channels, which share no die): PutCopy is Put for
// copy i of the copies a caller keeps of one logical file (group), placed
// so that a group's copies sit in different domains while the device has
// that many, a preference that yields to space rather than failing the
// write. MetaFiles puts its copies with it, so one lost die never takes
// all of a metadata file's copies.
type CopyPlacer interface {
	PutCopy(name string, data []byte, group string, i int) error
}

// ErrRangeUnsupported is returned (wrapped) by RangeWriter.WriteAt when the
// range cannot be rewritten in place.
var ErrRangeUnsupported = errors.New("range rewrite unsupported")

// DieFailer is implemented by stores on emulated flash that can fail a die.
type DieFailer interface {
	FailDie(die int) error
}

// WearReporter is implemented by stores on flash that know their wear.
type WearReporter interface {
	Wear() Wear
}

// Wear is a device's program/erase wear.
type Wear struct {
	Blocks          int64
	EraseCountTotal int64
	EraseCountMax   int64
	// DieErases sums the erases per die, channel-major (nil when the
	// store does not know its dies).
	DieErases []int64
}

func (w Wear) String() string {
	return fmt.Sprintf("%d blocks, %d erases (max %d)", w.Blocks, w.EraseCountTotal, w.EraseCountMax)
}

// Usage is a store's space accounting.
type Usage struct {
	CapacityBytes base.Bytes
	UsedBytes     base.Bytes
}

func (u Usage) String() string { return fmt.Sprintf("%s/%s", u.UsedBytes, u.CapacityBytes) }

// ErrNotFound is returned (wrapped) for missing files.
var ErrNotFound = fs.ErrNotExist

// IsNotFound reports whether err means a missing file.
func IsNotFound(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// ValidName checks a store file name.
func ValidName(name string) error {
	if name == "" || len(name) > 512 || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return base.InvalidArgumentf("store: bad file name %q", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return base.InvalidArgumentf("store: bad file name %q", name)
		}
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return base.InvalidArgumentf("store: bad character in file name %q", name)
		}
	}
	return nil
}

// InvertBits inverts count bits of b from bit offset off: the damage of a
// Store's FlipBits.
func InvertBits(b []byte, off int64, count int) error {
	if off < 0 || count <= 0 || off+int64(count) > int64(len(b))*8 {
		return base.InvalidArgumentf("store: flip of %d bits at bit %d outside a %d-byte file", count, off, len(b))
	}
	for i := int64(0); i < int64(count); i++ {
		bit := off + i
		b[bit/8] ^= 1 << (bit % 8)
	}
	return nil
}
