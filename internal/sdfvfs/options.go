package sdfvfs

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/sdf"
)

// Range is a byte range [Off, Off+Len) of a file (guardfs.Range: one
// implementation for both layers).
type Range = guardfs.Range

// LifetimeFunc picks the sdf lifetime hint of a file from its path and
// Pebble's write category.
type LifetimeFunc func(path string, category vfs.DiskWriteCategory) sdf.Lifetime

// RangesFunc returns the byte ranges of a just-written file that are
// metadata to keep in a second copy (DIRECT 000 section 4.1: local metadata
// duplication). It is called when a writable handle is closed, with the
// file's content readable through r. ok=false means "not a file this hook
// handles". SSTMetadataRanges is the hook for Pebble sstables. It is
// guardfs.RangesFunc.
type RangesFunc = guardfs.RangesFunc

// Options configures an FS. The zero value is usable.
type Options struct {
	// Lifetime picks the lifetime hint of created files (nil:
	// DefaultLifetime).
	Lifetime LifetimeFunc
	// DuplicateFile reports whether every byte of the file at path is kept
	// in a shadow copy (nil: DefaultDuplicateFile, which selects MANIFEST,
	// OPTIONS, CURRENT and marker files). Decided when the file is created.
	DuplicateFile func(path string) bool
	// NoDuplication turns whole-file and range duplication off (the
	// "crash" baseline of DIRECT: a corrupt MANIFEST takes the store down).
	NoDuplication bool
	// MetadataRanges, if set, marks ranges of files as metadata when their
	// writer closes them (typically SSTMetadataRanges).
	MetadataRanges RangesFunc
	// MaxRangeCopyBytes bounds the bytes of one file kept by range
	// duplication (default 16MiB, at most 1GiB); ranges beyond it are
	// refused with an invalid-argument error.
	MaxRangeCopyBytes base.Bytes
	// UnpinnedCopies lets sdf place shadow and range copies in any zone of
	// their lifetime class instead of pinning each copy to a channel its
	// primary does not use (sdf.CreateOn). Pinning guarantees the copies
	// sit on other dies at creation; sdf does not persist the pin, so zones
	// written after a reopen (GC relocation, further appends) may share a
	// channel (Placement reports it). A pinned file can only use zones of
	// its channel: under heavy space pressure sdf may collect garbage
	// first, and if the channel fails, the file fails over to its shadow.
	UnpinnedCopies bool
	// CopyReadAttempts is how many times a damaged range is read from its
	// copies before the read fails (default 2, range [1, 16]). sdf already
	// re-reads a page that fails its checksum once; another attempt on the
	// copy rides out transient flips on both (DIRECT: transient flips are
	// told from damage by reading again).
	CopyReadAttempts int
	// NoRepair stops the FS from rewriting a damaged primary range from
	// its good copy after serving a read from that copy.
	NoRepair bool
	// SiblingCopy recognizes the files that are one of two copies the
	// caller keeps itself (raftlog's generation files .0 and .1): copy 0
	// and copy 1 of a group are pinned to channels apart like a file and
	// its shadow, so that one die cannot hold a page of both (Reparo: a die
	// failure must leave a copy). nil: DefaultSiblingCopy. Pinning is off
	// with UnpinnedCopies.
	// A group may have more than two copies (guardfs keeps three and
	// more): copies 0 and 1 sit where a duplicated file and its shadow
	// do, and up to n copies of a group sit on n different channels of
	// the n healthy ones (siblingChannel).
	SiblingCopy func(path string) (group string, index int, ok bool)
}

const (
	defaultMaxRangeCopyBytes = 16 * base.MiB
	defaultCopyReadAttempts  = 2
	maxMaxRangeCopyBytes     = base.GiB
)

func (o Options) withDefaults() (Options, error) {
	if o.Lifetime == nil {
		o.Lifetime = DefaultLifetime
	}
	if o.DuplicateFile == nil {
		o.DuplicateFile = DefaultDuplicateFile
	}
	if o.SiblingCopy == nil {
		o.SiblingCopy = DefaultSiblingCopy
	}
	if o.MaxRangeCopyBytes == 0 {
		o.MaxRangeCopyBytes = defaultMaxRangeCopyBytes
	}
	if o.MaxRangeCopyBytes < 0 || o.MaxRangeCopyBytes > maxMaxRangeCopyBytes {
		return o, base.InvalidArgumentf("sdfvfs: MaxRangeCopyBytes %s not in [1B, 1GiB]", o.MaxRangeCopyBytes)
	}
	if o.CopyReadAttempts == 0 {
		o.CopyReadAttempts = defaultCopyReadAttempts
	}
	if o.CopyReadAttempts < 1 || o.CopyReadAttempts > 16 {
		return o, base.InvalidArgumentf("sdfvfs: CopyReadAttempts %d not in [1, 16]", o.CopyReadAttempts)
	}
	return o, nil
}

// DefaultLifetime maps Pebble's files onto sdf lifetime hints (SDF 002
// section 3: the storage engine tells the device how long data lives). WALs
// die at the next flush (short); MANIFEST, OPTIONS and markers are rewritten
// at manifest rotation (medium); flushed sstables sit in L0 until the next
// compaction (medium); compaction outputs live longest (long). The level of
// a compaction output is not visible at the vfs boundary; a KV layer that
// knows it can pass its own LifetimeFunc.
func DefaultLifetime(path string, category vfs.DiskWriteCategory) sdf.Lifetime {
	name := baseName(path)
	switch {
	case strings.HasSuffix(name, ".log"), category == "pebble-wal":
		return sdf.LifetimeShort
	case strings.HasSuffix(name, ".sst"), strings.HasSuffix(name, ".blob"):
		if category == "pebble-compaction" || category == "pebble-blob-file-rewrite" {
			return sdf.LifetimeLong
		}
		return sdf.LifetimeMedium
	}
	return sdf.LifetimeMedium
}

// DefaultDuplicateFile selects the files whose loss loses the whole store:
// MANIFEST-*, OPTIONS-*, CURRENT and the marker.* files that point at the
// current MANIFEST, and Pebble's *.dbtmp files, which it writes and then
// renames to OPTIONS or CURRENT (copying them at the rename instead would
// read them back from flash).
func DefaultDuplicateFile(path string) bool {
	name := baseName(path)
	return strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "OPTIONS-") ||
		name == "CURRENT" || strings.HasPrefix(name, "marker.") || strings.HasSuffix(name, ".dbtmp")
}

// DefaultSiblingCopy recognizes internal/raftlog's generation files,
// raftlog-GGGGGG.C (and raftlog-GGGGGG.C.tmp, written before the rename),
// as copy C of group raftlog-GGGGGG in their directory, and the copies
// internal/guardfs keeps of Pebble's metadata (guardfs.CopyOf: a framed
// file's copies and an sstable's sidecars): without their pins, a guarded
// file's copies, written one after the other, shared one zone, and one die
// failure took them all.
func DefaultSiblingCopy(path string) (group string, index int, ok bool) {
	if group, index, ok := guardfs.CopyOf(path); ok {
		return group, index, true
	}
	p := strings.TrimSuffix(path, ".tmp")
	name := baseName(p)
	if !strings.HasPrefix(name, "raftlog-") || len(name) < len("raftlog-")+3 || name[len(name)-2] != '.' {
		return "", 0, false
	}
	gen := name[len("raftlog-") : len(name)-2]
	for _, c := range gen {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	switch name[len(name)-1] {
	case '0':
		return p[:len(p)-2], 0, true
	case '1':
		return p[:len(p)-2], 1, true
	}
	return "", 0, false
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
