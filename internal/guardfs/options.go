package guardfs

import (
	"crypto/rand"
	"encoding/binary"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/guardfs/frames"
)

// Class is how guardfs protects a file, chosen from its name.
type Class uint8

const (
	// ClassPass files go to the underlying FS untouched (LOCK, WALs,
	// unknown files).
	ClassPass Class = iota
	// ClassFramed files are stored as Options.Copies framed copies
	// (MANIFEST, OPTIONS, markers, CURRENT, Pebble's *.dbtmp files).
	ClassFramed
	// ClassSealed files (sstables) pass their data through and get a
	// sidecar with their size and copies of their metadata ranges.
	ClassSealed
)

func (c Class) String() string {
	switch c {
	case ClassPass:
		return "pass"
	case ClassFramed:
		return "framed"
	case ClassSealed:
		return "sealed"
	}
	return "class?"
}

// DefaultClassify puts the files whose loss loses (or silently rolls
// back) the whole store in ClassFramed: MANIFEST-*, OPTIONS-*, marker.*,
// CURRENT, and Pebble's *.dbtmp files (written, then renamed to OPTIONS or
// CURRENT); sstables (*.sst) in ClassSealed; everything else in ClassPass.
func DefaultClassify(name string) Class {
	switch {
	case strings.HasPrefix(name, "MANIFEST-"), strings.HasPrefix(name, "OPTIONS-"),
		strings.HasPrefix(name, "marker."), name == "CURRENT", strings.HasSuffix(name, ".dbtmp"):
		return ClassFramed
	case strings.HasSuffix(name, ".sst"):
		return ClassSealed
	}
	return ClassPass
}

// Options configures an FS. The zero value is usable.
type Options struct {
	// Copies is the number of copies of every framed file (the file
	// itself counts as one) and of every sidecar: default 3, range [1, 3].
	// doc.go gives the failure probabilities behind the default.
	Copies int
	// FrameBytes is the most data one frame carries: default 512, range
	// [64, 4096]. Smaller frames lose less to one flipped bit and cost more
	// headers (frames.HeaderBytes each).
	FrameBytes int
	// Classify picks the class of a file from its base name (nil:
	// DefaultClassify). Decided at every operation, so a name's class must
	// not change while the store exists.
	Classify func(name string) Class
	// SSTReaderOptions opens sstables to find their metadata ranges when
	// they are sealed. It must carry the DB's comparer, mergers and key
	// schemas (internal/kv/engine: engine.SSTReaderOptions()). Zero: Pebble's
	// defaults.
	SSTReaderOptions sstable.ReaderOptions
	// NoRepair stops guardfs from rewriting a primary sstable's metadata
	// range that differs from its sidecar copy (reads are still served from
	// the copy) and from rewriting damaged copies of framed files on Open
	// and List (Verify always restores).
	NoRepair bool
	// NewID returns the identity of a new framed file or sidecar (nil: 64
	// random bits from crypto/rand). Identities must not repeat across
	// process lifetimes, so tests that inject one must keep it unique.
	NewID func() uint64
}

const (
	defaultCopies     = 3
	maxCopies         = 3
	defaultFrameBytes = 512
	minFrameBytes     = 64
)

func (o Options) withDefaults() (Options, error) {
	if o.Copies == 0 {
		o.Copies = defaultCopies
	}
	if o.Copies < 1 || o.Copies > maxCopies {
		return o, base.InvalidArgumentf("guardfs: Copies %d not in [1, %d]", o.Copies, maxCopies)
	}
	if o.FrameBytes == 0 {
		o.FrameBytes = defaultFrameBytes
	}
	if o.FrameBytes < minFrameBytes || o.FrameBytes > frames.MaxBytes {
		return o, base.InvalidArgumentf("guardfs: FrameBytes %d not in [%d, %d]", o.FrameBytes, minFrameBytes, frames.MaxBytes)
	}
	if o.Classify == nil {
		o.Classify = DefaultClassify
	}
	if o.SSTReaderOptions.Comparer == nil {
		o.SSTReaderOptions = defaultReaderOptions()
	}
	if o.NewID == nil {
		o.NewID = randomID
	}
	return o, nil
}

func defaultReaderOptions() sstable.ReaderOptions {
	opts := &pebble.Options{}
	opts.EnsureDefaults()
	return opts.MakeReaderOptions()
}

func randomID() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("guardfs: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return binary.LittleEndian.Uint64(b[:])
}
