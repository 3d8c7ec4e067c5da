package sdf

import (
	"fmt"
	"io"

	"github.com/flashmend/flashmend/internal/base"
)

// ReadRaw reads n bytes of the named file at off without stopping at
// corruption: pages that fail verification are returned as the device read
// them (an uncorrectable page's corrupt content, zeros for a failed die) and
// listed in bad. Upper layers use it for bit-by-bit majority voting (DIRECT
// policy 1) and must never treat its bytes as verified.
func (fs *FS) ReadRaw(name string, off, n int64) (data []byte, bad []*CorruptionError, err error) {
	if off < 0 || n < 0 || n > 1<<30 {
		return nil, nil, base.InvalidArgumentf("sdf: bad raw range off=%d len=%d", off, n)
	}
	fs.mu.Lock()
	ino := fs.files[name]
	fs.mu.Unlock()
	if ino == nil {
		return nil, nil, fmt.Errorf("read %q: %w", name, ErrNotExist)
	}
	data = make([]byte, n)
	got, err := fs.readAt(ino, data, off, readMode{raw: true, bad: &bad})
	if err == io.EOF {
		err = nil
	}
	return data[:got], bad, err
}

// RewriteRange replaces bytes [off, off+len(data)) of the named file, which
// must lie within the file, by programming the affected pages out of place
// and remapping them; the repair is durable when it returns (bytes still in
// an open writer's buffer are patched there and become durable with its
// next sync). Pages only
// partly covered are read first and must verify, so repair whole pages
// (a CorruptionError's range) when the old content is damaged.
func (fs *FS) RewriteRange(name string, off int64, data []byte) error {
	if off < 0 {
		return base.InvalidArgumentf("sdf: negative offset %d", off)
	}
	if fs.opts.ReadOnly {
		return ErrReadOnly
	}
	if len(data) == 0 {
		return nil
	}
	ps := int64(fs.l.Geometry.PageSize)
	fs.mu.Lock()
	ino := fs.files[name]
	if ino == nil {
		fs.mu.Unlock()
		return fmt.Errorf("rewrite %q: %w", name, ErrNotExist)
	}
	end := off + int64(len(data))
	if end > ino.size {
		size := ino.size
		fs.mu.Unlock()
		return base.InvalidArgumentf("sdf: rewrite of %q [%d,%d) past its size %d", name, off, end, size)
	}
	// Bytes still in the writer's buffer are patched there (they are in
	// memory, not damaged); only programmed pages are rewritten on flash.
	bufStart := int64(ino.bufPage) * ps
	if len(ino.buf) > 0 && end > bufStart {
		from := max(off, bufStart)
		copy(ino.buf[from-bufStart:], data[from-off:])
		ino.ver++
	}
	flashEnd := min(end, bufStart)
	if len(ino.buf) == 0 {
		flashEnd = end
	}
	size := ino.size
	hint := ino.hint
	fs.mu.Unlock()
	if flashEnd <= off {
		return nil
	}
	first, last := off/ps, (flashEnd-1)/ps
	pages := make([]byte, (last-first+1)*ps)
	// Boundary pages not fully covered keep their other bytes.
	for _, pg := range []int64{first, last} {
		lo, hi := pg*ps, min((pg+1)*ps, size)
		if off <= lo && flashEnd >= hi {
			continue
		}
		buf := pages[(pg-first)*ps : (pg-first+1)*ps]
		if _, err := fs.readAt(ino, buf[:hi-lo], lo, readMode{}); err != nil && err != io.EOF {
			return fmt.Errorf("sdf: rewrite of %q needs page %d intact: %w", name, pg, err)
		}
	}
	copy(pages[off-first*ps:], data[:flashEnd-off])
	lastValid := int(min(ps, size-last*ps))
	if err := fs.writePages(ino, hint, uint64(first), pages, lastValid, writeRewrite, nil); err != nil {
		return err
	}
	fs.ctr.rewriteBytes.Add(flashEnd - off)
	if err := fs.flushJournal(); err != nil {
		return err
	}
	return fs.reclaim()
}
