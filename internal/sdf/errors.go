package sdf

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf/channels"
	"github.com/flashmend/flashmend/internal/sdf/zones"
)

// Operating errors.
var (
	// ErrNotExist: no file of that name (wraps io/fs.ErrNotExist).
	ErrNotExist = fmt.Errorf("sdf: file does not exist: %w", fs.ErrNotExist)
	// ErrExist: a file of that name exists (wraps io/fs.ErrExist).
	ErrExist = fmt.Errorf("sdf: file exists: %w", fs.ErrExist)
	// ErrNoSpace: no empty zone is left even after garbage collection
	// (wraps base.ErrNoSpace).
	ErrNoSpace = zones.ErrNoSpace
	// ErrClosed: the FS or the file handle is closed.
	ErrClosed = channels.ErrClosed
	// ErrReadOnly: the handle was opened for reading, or the FS with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("sdf: read-only")
)

// CorruptionError reports data that cannot be trusted: a page that fails its
// checksum or identity check, an uncorrectable page, a bad block or a failed
// die. It names the physical location and the owning file range so that an
// upper layer can repair exactly that range (RewriteRange). It wraps
// base.ErrCorruption and the device's cause.
type CorruptionError struct {
	Addr   flash.PageAddr // the physical page
	Zone   int            // the zone holding it
	FileID uint64         // owner, 0 if unknown
	Name   string         // owner's name at the time of the read, "" if unknown
	Off    int64          // first byte of the damaged file range
	Len    int64          // length of the damaged file range
	Err    error          // cause: checksum/identity mismatch or a flash error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("sdf: corrupt page %s (zone %d) holding %q [%d, %d): %v",
		e.Addr, e.Zone, e.Name, e.Off, e.Off+e.Len, e.Err)
}

// Unwrap returns base.ErrCorruption and the cause.
func (e *CorruptionError) Unwrap() []error { return []error{base.ErrCorruption, e.Err} }

// errChecksum and errIdentity are the causes of corruptions this layer finds
// itself (the device's own are flash.ErrUncorrectable, ErrDieFailed, ErrBadBlock).
var (
	errChecksum = errors.New("page checksum mismatch")
	errIdentity = errors.New("page identity mismatch (misdirected or stale write)")
)

// isMediaError reports whether a device error means the page's content is
// lost or untrustworthy (as opposed to an operating error such as a closed
// device).
func isMediaError(err error) bool {
	return errors.Is(err, flash.ErrUncorrectable) || errors.Is(err, flash.ErrDieFailed) ||
		errors.Is(err, flash.ErrBadBlock) || errors.Is(err, base.ErrCorruption)
}
