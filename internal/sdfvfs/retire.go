package sdfvfs

import (
	"fmt"
	"strings"

	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf"
)

// Retired is what RetireCopies did.
type Retired struct {
	// Ranges and Bytes rewritten off the die: a duplicated file's from its
	// shadow, a shadow's from its file.
	Ranges int
	Bytes  int64
	// RangeCopies written again from their files (a range copy's records
	// are checksummed as a whole file's, so it is rewritten whole).
	RangeCopies int
	// Left counts the ranges on the die this layer keeps no copy of
	// (sstables, WALs, raft logs...): the layers above restore them.
	Left int
	// Unrepairable counts the ranges of copied files whose other copy did
	// not give them back either (both damaged): reported, left in place.
	Unrepairable int
}

func (r Retired) String() string {
	return fmt.Sprintf("%d ranges (%d B) rewritten, %d range copies written again, %d ranges left to the layers above, %d unrepairable",
		r.Ranges, r.Bytes, r.RangeCopies, r.Left, r.Unrepairable)
}

// RetireCopies moves off the failed die d what it held of the files whose
// copies this layer keeps, without waiting for a read to find the damage
// (Reparo 6: nothing stays mapped to a dead die; DIRECT 4.1: the metadata
// keeps two intact copies): the ranges of a duplicated file (MANIFEST,
// OPTIONS, CURRENT, markers) are rewritten from its shadow, the ranges of a
// shadow from its file, both through sdf.RewriteRange (whole pages, out of
// place, on healthy dies) and read back; a range copy with pages on the die
// is made again from its file. A file and its shadow are pinned to channels
// apart, so the die holds at most one of any byte's two copies. The ranges
// of other files are counted in Retired.Left. The identifier's CDR* query
// lists the ranges (sdf.FS.LostRanges).
func (fs *FS) RetireCopies(d flash.DieAddr) (Retired, error) {
	var out Retired
	lost, _, err := fs.sfs.LostRanges(d)
	if err != nil {
		return out, err
	}
	onDie := map[string][]Range{} // each file's ranges on the die
	for _, r := range lost {
		onDie[r.Name] = append(onDie[r.Name], Range{Off: r.Off, Len: r.Len})
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	redone := map[string]bool{}
	for _, r := range lost {
		name := r.Name
		switch {
		case strings.HasPrefix(name, shadowPrefix):
			ok, err := fs.rewriteFrom(name, strings.TrimPrefix(name, shadowPrefix), r)
			if err != nil {
				return out, err
			}
			out.count(ok, r)
		case strings.HasPrefix(name, rangesPrefix):
			p := strings.TrimPrefix(name, rangesPrefix)
			if redone[p] {
				continue
			}
			redone[p] = true
			ok, err := fs.redoRangesLocked(p, onDie[p])
			if err != nil {
				return out, err
			}
			if ok {
				out.RangeCopies++
			} else {
				out.Unrepairable++
			}
		case !isReserved(name) && !fs.opts.NoDuplication && fs.opts.DuplicateFile(name):
			ok, err := fs.rewriteFrom(name, shadowName(name), r)
			if err != nil {
				return out, err
			}
			out.count(ok, r)
		default:
			out.Left++
		}
	}
	return out, nil
}

func (r *Retired) count(ok bool, fr sdf.FileRange) {
	if ok {
		r.Ranges++
		r.Bytes += fr.Len
	} else {
		r.Unrepairable++
	}
}

// rewriteFrom rewrites range r of the file at dst with the same bytes of the
// file at src (a file and its shadow hold the same bytes at the same
// offsets), and reads them back. ok is false when src does not give the
// bytes back intact or the rewrite does not verify. The caller holds fs.mu.
func (fs *FS) rewriteFrom(dst, src string, r sdf.FileRange) (ok bool, err error) {
	s, err := fs.sfs.OpenFile(src)
	if err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, err
	}
	defer s.Close()
	d, err := fs.sfs.OpenFile(dst)
	if err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, err
	}
	end := min(r.Off+r.Len, d.Size(), s.Size())
	_ = d.Close()
	if end <= r.Off {
		return false, nil // the copy never held these bytes (a torn shadow)
	}
	buf := make([]byte, end-r.Off)
	if n, _ := s.ReadAt(buf, r.Off); n != len(buf) {
		return false, nil // src does not give them back either
	}
	if err := fs.sfs.RewriteRange(dst, r.Off, buf); err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, fmt.Errorf("sdfvfs: rewriting %s of %q off a failed die: %w", r, dst, err)
	}
	check := make([]byte, len(buf))
	d, err = fs.sfs.OpenFile(dst)
	if err != nil {
		return false, nil
	}
	n, _ := d.ReadAt(check, r.Off)
	_ = d.Close()
	return n == len(check) && string(check) == string(buf), nil
}

// redoRangesLocked writes the range copy of the file at p again, from the
// ranges its current copy lists or, when that no longer loads, from
// Options.MetadataRanges. ok is false when neither says what to copy, when
// a range to copy lies in the file's own ranges on the die (lost, or
// already retired with zeros by the layer above: NB: copying those bytes
// would make a verified copy of what the die took), or when the file does
// not give the ranges back. The caller holds fs.mu.
func (fs *FS) redoRangesLocked(p string, onDie []Range) (ok bool, err error) {
	if _, err := fs.sfs.Stat(p); err != nil {
		if isNotExist(err) {
			// A copy without its file: an orphan (New removes them too).
			return true, fs.sfs.Remove(rangesName(p))
		}
		return false, err
	}
	var ranges []Range
	if recs, err := fs.loadRanges(p); err == nil {
		for _, rec := range recs {
			ranges = append(ranges, rec.Range)
		}
	}
	if len(ranges) == 0 && fs.opts.MetadataRanges != nil {
		f, err := fs.sfs.OpenFile(p)
		if err != nil {
			return false, nil
		}
		rs, found, herr := fs.opts.MetadataRanges(p, verifiedReader{fs: fs, f: f}, f.Size())
		_ = f.Close()
		if herr == nil && found {
			ranges = rs
		}
	}
	if len(ranges) == 0 {
		return false, nil
	}
	for _, a := range ranges {
		for _, b := range onDie {
			if a.Off < b.Off+b.Len && b.Off < a.Off+a.Len {
				return false, nil
			}
		}
	}
	if err := fs.duplicateRangesLocked(p, ranges); err != nil {
		return false, nil
	}
	return true, nil
}

// FillFromRangeCopy writes into buf, which holds bytes [off, off+len(buf))
// of the file at name, every byte its range copy holds of them in a
// verified record, and reports how many (for objstore.RetireLost: the
// metadata ranges of an sstable whose page a failed die took are served
// from the copy on reads, but a whole page cannot be rewritten from it, so
// a page retired with zeros keeps them this way). Bytes no record holds
// are left as they are.
func (fs *FS) FillFromRangeCopy(name string, off int64, buf []byte) int {
	recs, err := fs.loadRanges(name)
	if err != nil {
		return 0
	}
	end, filled := off+int64(len(buf)), 0
	for _, r := range recs {
		lo, hi := max(off, r.Off), min(end, r.End())
		if !r.ok || lo >= hi {
			continue
		}
		filled += copy(buf[lo-off:hi-off], r.data[lo-r.Off:hi-r.Off])
	}
	return filled
}
