package filestore

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/invariants"
)

// The pack file format: pure encoding and decoding, no I/O (doc.go has the
// layout).

const (
	packMagic        = "FMPACK\x00\x01"
	packHeaderSize   = 16
	recordMagic      = 0x4b52_4d46 // "FMRK"
	recordHeaderSize = 20
	recordPut        = 1
	recordDelete     = 2
	// packCompactMinDead is the dead bytes below which a pack is never
	// compacted.
	packCompactMinDead = 1 << 20
	// packMaxOpen bounds the pack files kept open.
	packMaxOpen = 256
	packSuffix  = ".pack"
)

// indexMember starts the member names of a sums pack that hold the copies
// of the blob's local index entry: i/<blob>/<shard>.<copy> is member
// "i.<copy>" of pack k/<blob>/<shard>. No k/ name maps to such a member (a
// member name holds no dot).
const indexMember = "i."

// packedName splits name into its pack key and member when it is packed.
func packedName(name string) (key, member string, ok bool) {
	if rest, ok := strings.CutPrefix(name, "i/"); ok {
		// i/<blob>/<shard>.<copy>, exactly one directory deep.
		slash := strings.IndexByte(rest, '/')
		dot := strings.LastIndexByte(rest, '.')
		if slash <= 0 || strings.IndexByte(rest[slash+1:], '/') >= 0 || dot <= slash+1 || dot == len(rest)-1 || len(indexMember)+len(rest)-dot-1 > 255 {
			return "", "", false
		}
		return "k/" + rest[:dot], indexMember + rest[dot+1:], true
	}
	if !strings.HasPrefix(name, "d/") && !strings.HasPrefix(name, "k/") {
		return "", "", false
	}
	slash := strings.LastIndexByte(name, '/')
	dot := strings.LastIndexByte(name, '.')
	if dot <= slash+1 || dot == len(name)-1 || len(name)-dot-1 > 255 {
		return "", "", false
	}
	return name[:dot], name[dot+1:], true
}

// memberName is the store name of member of pack key: packedName's
// inverse.
func memberName(key, member string) string {
	if copyName, ok := strings.CutPrefix(member, indexMember); ok {
		return "i/" + strings.TrimPrefix(key, "k/") + "." + copyName
	}
	return key + "." + member
}

// isIndexName reports whether name is a copy of a local index entry kept
// as a member of its blob's sums pack (i/<blob>/<shard>.<copy>). The format
// before index members kept each as a plain file of its own at that name
// (written out of place): the store still reads, lists, damages and
// deletes such a file there when the pack holds no such member.
func isIndexName(name string) bool {
	_, _, ok := packedName(name)
	return ok && strings.HasPrefix(name, "i/")
}

// FileOf returns the file, relative to the store's root and with
// forward slashes, that holds the store name: its pack file when the name
// is packed, else the name itself (fault injectors use it to hit the
// names kept in one file).
func FileOf(name string) string {
	if key, _, ok := packedName(name); ok {
		return key + packSuffix
	}
	return name
}

func packHeader(key string) []byte {
	h := make([]byte, packHeaderSize)
	copy(h, packMagic)
	binary.LittleEndian.PutUint32(h[8:], base.CRC32C([]byte(key)))
	binary.LittleEndian.PutUint32(h[12:], base.CRC32C(h[:12]))
	return h
}

// encodeRecord returns a record: header, member name, content.
func encodeRecord(key string, kind byte, member string, data []byte) []byte {
	return appendRecord(nil, key, kind, member, data)
}

// appendRecord appends the record of data to dst (every byte of the record
// is written: dst's old content does not matter).
func appendRecord(dst []byte, key string, kind byte, member string, data []byte) []byte {
	dst = slices.Grow(dst, recordHeaderSize+len(member)+len(data))
	return append(appendRecordHead(dst, key, kind, member, data), data...)
}

// appendRecordHead appends the record of data without the data (its header
// and member name, which the data follows) to dst.
func appendRecordHead(dst []byte, key string, kind byte, member string, data []byte) []byte {
	n := recordHeaderSize + len(member)
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	rec := dst[start:]
	clear(rec[:recordHeaderSize])
	binary.LittleEndian.PutUint32(rec[0:], recordMagic)
	rec[4] = kind
	rec[5] = byte(len(member))
	binary.LittleEndian.PutUint32(rec[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(rec[12:], base.CRC32C(data))
	copy(rec[recordHeaderSize:], member)
	binary.LittleEndian.PutUint32(rec[16:], headerCRC(key, rec[:16], member))
	return dst
}

// recordBufs holds record buffers for appends (a chunk's record is about
// 64 KiB: allocating and zeroing one per write was 3% of a PUT's CPU).
var recordBufs sync.Pool

func headerCRC(key string, fixed []byte, member string) uint32 {
	c := base.CRC32CUpdate(base.CRC32C([]byte(key)), fixed)
	return base.CRC32CUpdate(c, []byte(member))
}

// recordHeader is a decoded, verified record header.
type recordHeader struct {
	kind    byte
	member  string
	n       int64 // content length
	dataCRC uint32
}

func (h recordHeader) size() int64 { return recordHeaderSize + int64(len(h.member)) + h.n }

// decodeRecordHeader verifies the record header at the start of b (which
// holds at least the header and name when they fit the file).
func decodeRecordHeader(key string, b []byte) (recordHeader, bool) {
	if len(b) < recordHeaderSize || binary.LittleEndian.Uint32(b) != recordMagic {
		return recordHeader{}, false
	}
	kind, nameLen := b[4], int(b[5])
	if (kind != recordPut && kind != recordDelete) || nameLen == 0 || b[6] != 0 || b[7] != 0 || len(b) < recordHeaderSize+nameLen {
		return recordHeader{}, false
	}
	member := string(b[recordHeaderSize : recordHeaderSize+nameLen])
	if headerCRC(key, b[:16], member) != binary.LittleEndian.Uint32(b[16:]) {
		return recordHeader{}, false
	}
	h := recordHeader{kind: kind, member: member, n: int64(binary.LittleEndian.Uint32(b[8:])), dataCRC: binary.LittleEndian.Uint32(b[12:])}
	if kind == recordDelete && h.n != 0 {
		return recordHeader{}, false
	}
	return h, true
}

// checkRecord asserts, in invariants builds, that rec (about to be written)
// verifies and decodes back to what it stores: the checksum-before-the-write
// half of the pair whose other half is the load's scan, which verifies every
// header it reads (and the content of the last record).
func checkRecord(key string, rec []byte, kind byte, member string, data []byte) {
	if !invariants.Enabled {
		return
	}
	h, ok := decodeRecordHeader(key, rec)
	_ = invariants.Check(ok && h.kind == kind && h.member == member && h.n == int64(len(data)) &&
		int64(len(rec)) == h.size() && h.dataCRC == base.CRC32C(rec[len(rec)-len(data):]),
		"filestore: pack %s: record of %q does not decode back before its write", key, member)
}
