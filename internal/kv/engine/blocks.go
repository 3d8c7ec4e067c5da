package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
)

// blockHandleRE finds the block handle in Pebble's checksum error
// ("block <offset>/<length>: crc32c checksum mismatch ...").
var blockHandleRE = regexp.MustCompile(`block (\d+)/(\d+)`)

// tableBlockRE matches the backing file and the block of a Pebble block
// checksum error ("pebble: file 000123: block 4096/1774: ...").
var tableBlockRE = regexp.MustCompile(`file (\d+): block (\d+)/(\d+)`)

// corruptTableBlock returns the backing file number and the block a Pebble
// corruption error names, if it names both.
func corruptTableBlock(err error) (file uint64, h block.Handle, ok bool) {
	if err == nil {
		return 0, block.Handle{}, false
	}
	m := tableBlockRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, block.Handle{}, false
	}
	file, err1 := strconv.ParseUint(m[1], 10, 64)
	off, err2 := strconv.ParseUint(m[2], 10, 64)
	n, err3 := strconv.ParseUint(m[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || n == 0 || n > maxBlockBytes {
		return 0, block.Handle{}, false
	}
	return file, block.Handle{Offset: off, Length: n}, true
}

// CorruptBlockHandle returns the handle of the block a Pebble corruption
// error names, if it names one.
func CorruptBlockHandle(err error) (block.Handle, bool) {
	if err == nil {
		return block.Handle{}, false
	}
	m := blockHandleRE.FindStringSubmatch(err.Error())
	if m == nil {
		return block.Handle{}, false
	}
	off, err1 := strconv.ParseUint(m[1], 10, 64)
	n, err2 := strconv.ParseUint(m[2], 10, 64)
	if err1 != nil || err2 != nil || n == 0 || n > maxBlockBytes {
		return block.Handle{}, false
	}
	return block.Handle{Offset: off, Length: n}, true
}

// maxBlockBytes bounds a block handle parsed from an error message (Pebble's
// blocks are tens of KiB; a larger "handle" is not one).
const maxBlockBytes = 64 << 20

// rereadAttempts is how many times RereadBlock reads a block before it
// calls the damage persistent: one more flip on the re-read itself must not
// turn a transient error into a repair.
const rereadAttempts = 2

// RereadBlock reads block h of the sstable at path from the file (not the
// block cache) and reports whether its checksum verifies on any of
// rereadAttempts reads. A block that verifies is intact on disk: the error
// that named it was a transient flip.
func RereadBlock(fs vfs.FS, path string, h block.Handle) (bool, error) {
	f, err := fs.Open(path)
	if err != nil {
		return false, fmt.Errorf("kv: re-read %s: %w", path, err)
	}
	defer f.Close()
	return BlockVerifies(f, h)
}

// blockChecksumOK checks a block read with its trailer (compression type,
// checksum) against Pebble's CRC32C (masked, as LevelDB masks it) or
// xxhash64 checksum.
//
// NB: not block.ValidateChecksum: on a mismatch that searches every
// single-bit flip of the block for a diagnostic, about 130 MB of CRC for a
// 4 KiB block. A store under repair reads damaged blocks often; Pebble's own
// reads pay that once per read, ours need not.
func blockChecksumOK(buf []byte, h block.Handle) bool {
	if uint64(len(buf)) < h.Length+block.TrailerLen {
		return false
	}
	want := binary.LittleEndian.Uint32(buf[h.Length+1:])
	data := buf[:h.Length+1]
	c := base.CRC32C(data)
	if uint32(c>>15|c<<17)+0xa282ead8 == want {
		return true
	}
	return uint32(xxhash.Sum64(data)) == want
}

// VerifySSTable checks every data block of the sstable at path against its
// checksum (our own check, blockChecksumOK: Pebble's ValidateBlockChecksums
// searches every single-bit flip of a damaged block) and that its
// metadata reads. It returns an error naming the first damaged block, in
// the form Pebble's errors take ("block <offset>/<length>"), or nil.
func VerifySSTable(fs vfs.FS, path string, ro sstable.ReaderOptions) error {
	return VerifySSTableSkipping(fs, path, ro, nil)
}

// VerifySSTableSkipping is VerifySSTable passing over the damaged blocks
// skip reports (by offset; nil: none): blocks whose key range a patch
// already cut out of the live data, which the backing file keeps until a
// compaction drops it. NB: without it the scrubber named the same repaired
// block of a file on every pass, and damage in a later block of that file
// was never found by a scrub.
func VerifySSTableSkipping(fs vfs.FS, path string, ro sstable.ReaderOptions, skip func(offset uint64) bool) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := objstorageprovider.NewFileReadable(f, fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		f.Close()
		return err
	}
	rd, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		readable.Close()
		return base.CorruptionErrorf("kv: scrub %s: %w", path, err)
	}
	defer rd.Close()
	blocks, err := SSTDataBlocks(rd)
	if err != nil {
		return base.CorruptionErrorf("kv: scrub %s: index: %w", path, err)
	}
	raw, err := fs.Open(path)
	if err != nil {
		return err
	}
	defer raw.Close()
	for _, b := range blocks {
		ok, err := BlockVerifies(raw, b.h)
		if err != nil {
			return err
		}
		if !ok && (skip == nil || !skip(b.h.Offset)) {
			return base.CorruptionErrorf("kv: scrub %s: block %d/%d: checksum mismatch", path, b.h.Offset, b.h.Length)
		}
	}
	return nil
}

// TableLayout reads where each block of the sstable at path lies (the
// tools that damage a table on purpose, and the tests, aim with it).
func TableLayout(fs vfs.FS, path string, ro sstable.ReaderOptions) (*sstable.Layout, error) {
	r, err := openTable(fs, path, ro)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Layout()
}

// DataBlockAt reports whether a data block of the sstable at path starts
// at offset (as its index says). A corruption report names a block; when
// every data block in a table's live bounds verifies, a named data block
// lies outside them (what an excise cut away), and a named block that is
// no data block is the table's metadata.
func DataBlockAt(fs vfs.FS, path string, ro sstable.ReaderOptions, offset uint64) (bool, error) {
	r, err := openTable(fs, path, ro)
	if err != nil {
		return false, err
	}
	defer r.Close()
	blocks, err := SSTDataBlocks(r)
	if err != nil {
		return false, Classify(err)
	}
	for _, b := range blocks {
		if b.h.Offset == offset {
			return true, nil
		}
	}
	return false, nil
}

// openTable opens the sstable at path for reading outside the engine (the
// caller closes it). A table whose footer or metadata does not read fails
// as corruption.
func openTable(fs vfs.FS, path string, ro sstable.ReaderOptions) (*sstable.Reader, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	readable, err := objstorageprovider.NewFileReadable(f, fs, objstorageprovider.NewReadaheadConfig(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		readable.Close()
		return nil, Classify(err)
	}
	return r, nil
}
