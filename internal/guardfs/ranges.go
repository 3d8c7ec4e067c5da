package guardfs

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs/frames"
	"github.com/flashmend/flashmend/internal/guardfs/sstmeta"
)

// Range is a byte range [Off, Off+Len) of a file.
type Range = frames.Range

// RangesFunc returns the byte ranges of a just-written file that are
// metadata to keep in a second copy (DIRECT 000 section 4.1: local metadata
// duplication). It is called with the file's content readable through r.
// ok=false means "not a file this hook handles". SSTMetadataRanges is the
// hook for Pebble sstables (internal/sdfvfs uses it through an alias).
type RangesFunc func(path string, r io.ReaderAt, size int64) (ranges []Range, ok bool, err error)

// SSTMetadataRanges returns a RangesFunc for Pebble sstables (*.sst): the
// index blocks (and top-level index), filter blocks, range-deletion and
// range-key blocks, value index, blob reference index, properties,
// meta-index and footer, each block with its 5-byte trailer. Every block's
// checksum is verified first: a table whose metadata does not verify is an
// error marked as corruption (a copy of damaged bytes would protect
// nothing). ro must carry the DB's comparer, mergers and key schemas so the
// table opens.
func SSTMetadataRanges(ro sstable.ReaderOptions) RangesFunc {
	return func(path string, r io.ReaderAt, size int64) ([]Range, bool, error) {
		if !isSST(path) {
			return nil, false, nil
		}
		l, err := sstmeta.ReadLayout(ro, readableFile{r: r, size: size, name: baseName(path)}, size)
		if err != nil {
			return nil, false, err
		}
		out := make([]Range, 0, len(l.Regions))
		for _, reg := range l.Regions {
			if reg.Block {
				if _, err := l.VerifiedBytes(r, reg); err != nil {
					return nil, false, err
				}
			}
			out = append(out, Range{Off: reg.Off, Len: reg.Len})
		}
		return out, true, nil
	}
}

func isSST(path string) bool {
	return len(path) > 4 && path[len(path)-4:] == ".sst"
}

// baseName is the last element of a slash- or OS-separated path.
func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' || p[i] == os.PathSeparator {
			return p[i+1:]
		}
	}
	return p
}

// readableFile adapts an io.ReaderAt of known size to sstable.ReadableFile.
type readableFile struct {
	r    io.ReaderAt
	size int64
	name string
}

func (f readableFile) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }
func (f readableFile) Close() error                            { return nil }
func (f readableFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: f.name, size: f.size}, nil
}

// fileInfo is a vfs.FileInfo of a file as guardfs presents it (a framed
// file at its logical size, a sealed sstable at its recorded size).
type fileInfo struct {
	name  string
	size  int64
	mtime time.Time
	mode  os.FileMode
}

var _ vfs.FileInfo = fileInfo{}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) ModTime() time.Time { return fi.mtime }
func (fi fileInfo) IsDir() bool        { return false }
func (fi fileInfo) Sys() any           { return nil }
func (fi fileInfo) Mode() os.FileMode {
	if fi.mode == 0 {
		return 0o644
	}
	return fi.mode
}
func (fi fileInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
func (fi fileInfo) String() string         { return fmt.Sprintf("%s (%d B)", fi.name, fi.size) }
