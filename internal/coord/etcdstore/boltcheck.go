package etcdstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// boltCheck walks a bbolt database file (etcd's backend) without bbolt and
// reports the first structural damage: NB: bbolt panics on damaged pages,
// and with etcd's NoFreelistSync it walks every page at open in a goroutine
// of its own, where no recover reaches, so a damaged backend would take the
// whole process down. The walk checks what bbolt asserts on that path: a
// valid meta page (magic, version, FNV-64a checksum; the newer of the two),
// every page reachable from the root bucket inside the file and below the
// high-water mark, naming itself, of branch or leaf type, referenced once,
// its elements and keys inside the page, keys sorted and within their
// parent's range, and nested buckets (inline or not) the same way. It also
// returns the value of key in bucket (the consistent index etcd keeps in
// "meta"), nil when absent.
//
// The format (bbolt 1.x, little endian on the machines flashmend runs on):
// a page header is id u64, flags u16, count u16, overflow u32 (16 bytes); a
// meta page holds magic u32, version u32, page size u32, flags u32, root
// bucket {root page u64, sequence u64}, freelist page u64, high-water page
// u64, txid u64, checksum u64; branch elements are {pos u32, ksize u32,
// page u64} and leaf elements {flags u32, pos u32, ksize u32, vsize u32},
// pos counted from the element itself; a bucket value is {root page u64,
// sequence u64}, followed by an inline page when the root is 0.
func boltCheck(file []byte, bucket, key []byte) (value []byte, err error) {
	const (
		pageHeader   = 16
		elemSize     = 16
		branchFlag   = 0x01
		leafFlag     = 0x02
		metaFlag     = 0x04
		bucketLeaf   = 0x01
		boltMagic    = 0xED0CDAED
		boltVersion  = 2
		maxTreeDepth = 64
	)
	le := binary.LittleEndian
	// Meta pages 0 and 1 live at the start; the page size is in the meta.
	type meta struct {
		pageSize        int
		root, hwm, txid uint64
	}
	readMeta := func(off int) (meta, bool) {
		if off+pageHeader+64 > len(file) || le.Uint16(file[off+8:]) != metaFlag {
			return meta{}, false
		}
		m := file[off+pageHeader : off+pageHeader+64]
		h := fnv.New64a()
		h.Write(m[:56])
		if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion || le.Uint64(m[56:]) != h.Sum64() {
			return meta{}, false
		}
		return meta{pageSize: int(le.Uint32(m[8:])), root: le.Uint64(m[16:]), hwm: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
	}
	m0, ok0 := readMeta(0)
	var best meta
	ok := false
	if ok0 {
		best, ok = m0, true
	}
	if ok0 && m0.pageSize >= 512 {
		if m1, ok1 := readMeta(m0.pageSize); ok1 && m1.txid > m0.txid {
			best = m1
		}
	} else {
		for _, ps := range []int{4096, 8192, 16384, 65536} {
			if m1, ok1 := readMeta(ps); ok1 && m1.pageSize == ps {
				best, ok = m1, true
				break
			}
		}
	}
	if !ok || best.pageSize < 512 || best.pageSize > 1<<20 {
		return nil, fmt.Errorf("no valid meta page")
	}
	ps := best.pageSize
	if best.root >= best.hwm || best.hwm*uint64(ps) > uint64(len(file)) {
		return nil, fmt.Errorf("root page %d or high-water mark %d outside the %d-byte file", best.root, best.hwm, len(file))
	}
	seen := map[uint64]bool{}
	var walkPage func(p []byte, id uint64, inline bool, lo, hi []byte, depth int, visit func(k, v []byte, flags uint32) error) error
	walkPage = func(p []byte, id uint64, inline bool, lo, hi []byte, depth int, visit func(k, v []byte, flags uint32) error) error {
		if depth > maxTreeDepth {
			return fmt.Errorf("page %d: tree deeper than %d", id, maxTreeDepth)
		}
		if len(p) < pageHeader {
			return fmt.Errorf("page %d: truncated", id)
		}
		flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
		if !inline && le.Uint64(p[0:]) != id {
			return fmt.Errorf("page %d names itself %d", id, le.Uint64(p[0:]))
		}
		if flags != branchFlag && flags != leafFlag {
			return fmt.Errorf("page %d: type %#x is neither branch nor leaf", id, flags)
		}
		if pageHeader+count*elemSize > len(p) {
			return fmt.Errorf("page %d: %d elements do not fit", id, count)
		}
		var prev []byte
		for i := 0; i < count; i++ {
			e := pageHeader + i*elemSize
			var k, v []byte
			var pos, ksize, vsize int
			if flags == branchFlag {
				pos, ksize = int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:]))
			} else {
				pos, ksize, vsize = int(le.Uint32(p[e+4:])), int(le.Uint32(p[e+8:])), int(le.Uint32(p[e+12:]))
			}
			if pos < 0 || ksize < 0 || vsize < 0 || e+pos+ksize+vsize > len(p) || e+pos+ksize+vsize < e {
				return fmt.Errorf("page %d element %d: key or value outside the page", id, i)
			}
			k = p[e+pos : e+pos+ksize]
			v = p[e+pos+ksize : e+pos+ksize+vsize]
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				return fmt.Errorf("page %d element %d: keys out of order", id, i)
			}
			if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
				return fmt.Errorf("page %d element %d: key outside its parent's range", id, i)
			}
			prev = k
			if flags == branchFlag {
				child := le.Uint64(p[e+8:])
				var next []byte
				if i+1 < count {
					ne := pageHeader + (i+1)*elemSize
					npos, nksize := int(le.Uint32(p[ne:])), int(le.Uint32(p[ne+4:]))
					if ne+npos+nksize > len(p) || npos < 0 || nksize < 0 {
						return fmt.Errorf("page %d element %d: key outside the page", id, i+1)
					}
					next = p[ne+npos : ne+npos+nksize]
				} else {
					next = hi
				}
				cp, err := pageAt(file, child, ps, best.hwm, seen)
				if err != nil {
					return err
				}
				if err := walkPage(cp, child, false, k, next, depth+1, visit); err != nil {
					return err
				}
				continue
			}
			if err := visit(k, v, le.Uint32(p[e:])); err != nil {
				return err
			}
		}
		return nil
	}
	// walkBucket walks the bucket whose value (header and maybe an inline
	// page) is v, and every bucket nested in it.
	var walkBucket func(v []byte, depth int, visit func(k, v []byte, flags uint32) error) error
	nested := func(depth int, inner func(k, v []byte, flags uint32) error) func(k, v []byte, flags uint32) error {
		return func(k, v []byte, flags uint32) error {
			if flags&bucketLeaf != 0 {
				if err := walkBucket(v, depth+1, func([]byte, []byte, uint32) error { return nil }); err != nil {
					return err
				}
			}
			return inner(k, v, flags)
		}
	}
	walkBucket = func(v []byte, depth int, visit func(k, v []byte, flags uint32) error) error {
		if len(v) < 16 {
			return fmt.Errorf("bucket value of %d bytes", len(v))
		}
		root := le.Uint64(v[0:])
		if root == 0 {
			return walkPage(v[16:], 0, true, nil, nil, depth, nested(depth, visit))
		}
		p, err := pageAt(file, root, ps, best.hwm, seen)
		if err != nil {
			return err
		}
		return walkPage(p, root, false, nil, nil, depth, nested(depth, visit))
	}
	rootValue := make([]byte, 16)
	le.PutUint64(rootValue, best.root)
	var target []byte
	err = walkBucket(rootValue, 0, func(k, v []byte, flags uint32) error {
		if flags&bucketLeaf != 0 && bytes.Equal(k, bucket) {
			target = v
		}
		return nil
	})
	if err != nil || target == nil {
		return nil, err
	}
	err = walkBucket(target, 1, func(k, v []byte, flags uint32) error {
		if flags&bucketLeaf == 0 && bytes.Equal(k, key) {
			value = append([]byte(nil), v...)
		}
		return nil
	})
	return value, err
}

// pageAt returns page id (with its overflow pages) of a bbolt file, checking
// it is inside the file and below the high-water mark and that no page was
// reached twice.
func pageAt(file []byte, id uint64, pageSize int, hwm uint64, seen map[uint64]bool) ([]byte, error) {
	if id < 2 || id >= hwm {
		return nil, fmt.Errorf("page %d outside [2, %d)", id, hwm)
	}
	off := id * uint64(pageSize)
	if off+16 > uint64(len(file)) {
		return nil, fmt.Errorf("page %d past the end of the file", id)
	}
	overflow := uint64(binary.LittleEndian.Uint32(file[off+12:]))
	end := off + (overflow+1)*uint64(pageSize)
	if id+overflow >= hwm || end > uint64(len(file)) {
		return nil, fmt.Errorf("page %d with %d overflow pages past the end", id, overflow)
	}
	for i := uint64(0); i <= overflow; i++ {
		if seen[id+i] {
			return nil, fmt.Errorf("page %d referenced twice", id+i)
		}
		seen[id+i] = true
	}
	return file[off:end], nil
}
