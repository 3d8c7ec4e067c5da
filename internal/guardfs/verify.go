package guardfs

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// Damage is a range of a file that guardfs could not recover.
type Damage struct {
	Path   string
	Range  Range
	Reason string
}

func (d Damage) String() string { return fmt.Sprintf("%s %s: %s", d.Path, d.Range, d.Reason) }

// VerifyReport is what one Verify pass found and did.
type VerifyReport struct {
	Framed  int // framed files checked
	Sealed  int // sstables checked
	Skipped int // files open for writing, left alone
	// Stats is the change of the FS counters during the pass (it includes
	// whatever else used the FS meanwhile).
	Stats  Stats
	Damage []Damage
}

func (r VerifyReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "framed %d, sealed %d, skipped %d; %s", r.Framed, r.Sealed, r.Skipped, r.Stats)
	for _, d := range r.Damage {
		fmt.Fprintf(&b, "\n  damage: %s", d)
	}
	return b.String()
}

func (s Stats) sub(o Stats) Stats {
	return Stats{FramesRepaired: s.FramesRepaired - o.FramesRepaired, CopiesRestored: s.CopiesRestored - o.CopiesRestored,
		FilesRestored: s.FilesRestored - o.FilesRestored, RangeCopyReads: s.RangeCopyReads - o.RangeCopyReads,
		RangeRepairs: s.RangeRepairs - o.RangeRepairs, ZeroFilledBytes: s.ZeroFilledBytes - o.ZeroFilledBytes,
		Unrecoverable: s.Unrecoverable - o.Unrecoverable, SidecarsWritten: s.SidecarsWritten - o.SidecarsWritten, SealsFromWrites: s.SealsFromWrites - o.SealsFromWrites,
		SealErrors: s.SealErrors - o.SealErrors, CopyErrors: s.CopyErrors - o.CopyErrors, ReadErrors: s.ReadErrors - o.ReadErrors}
}

// Verify checks every guarded file directly in dir (the scrubber's entry
// point; subdirectories are not visited): every copy of every framed file
// is merged and the missing, damaged or torn ones rewritten; every
// sstable's sidecar is merged and restored likewise (an sstable without
// one is sealed now), and the sstable's metadata ranges are compared with
// the sidecar and rewritten in place where they differ. What no copy holds
// is reported as Damage: ranges of framed files lost in every copy,
// sstables shorter than their recorded size or deleted (their data blocks
// read as corruption, for the KV store to patch), sstables whose metadata
// does not verify and that have no sidecar. Temporary files of
// interrupted restores are removed. Verify restores even with
// Options.NoRepair. Files open for writing are skipped.
func (fs *FS) Verify(dir string) (VerifyReport, error) {
	before := fs.Stats()
	var rep VerifyReport
	names, err := fs.List(dir)
	if err != nil {
		return rep, err
	}
	fs.mu.Lock()
	for _, t := range fs.loadIndex(dir, true).temps {
		_ = removeIgnoringMissing(fs.inner, t)
	}
	fs.mu.Unlock()
	for _, n := range names {
		p := fs.inner.PathJoin(dir, n)
		switch fs.opts.Classify(n) {
		case ClassFramed:
			rep.verifyFramed(fs, p)
		case ClassSealed:
			rep.verifySealed(fs, p)
		}
	}
	rep.Stats = fs.Stats().sub(before)
	return rep, nil
}

func (rep *VerifyReport) verifyFramed(fs *FS, p string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, writing := fs.writers[fs.key(p)]; writing {
		rep.Skipped++
		return
	}
	st, ok := fs.restoreFramedLocked(p, true)
	if !ok {
		return
	}
	rep.Framed++
	for _, l := range st.m.Lost {
		rep.Damage = append(rep.Damage, Damage{Path: p, Range: l, Reason: "lost in every copy"})
	}
	if st.unreadable() {
		rep.Damage = append(rep.Damage, Damage{Path: p, Reason: "no frame of the file verifies in any copy; copies left in place"})
	}
}

func (rep *VerifyReport) verifySealed(fs *FS, p string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, writing := fs.writers[fs.key(p)]; writing {
		rep.Skipped++
		return
	}
	rep.Sealed++
	fi, serr := fs.inner.Stat(p)
	exists := serr == nil
	sc, lerr := fs.loadSidecarLocked(p, true)
	if exists && (sc == nil || len(sc.lost) > 0 && fi.Size() == sc.size) {
		// No usable sidecar, or some copied ranges lost in every sidecar
		// copy: seal afresh from the file if its metadata verifies.
		fresh, err := fs.sealLocked(p)
		if err == nil {
			sc = fresh
		} else if sc == nil {
			reason := "no sidecar and its metadata does not verify: " + err.Error()
			if lerr != nil {
				reason = lerr.Error() + "; " + reason
			}
			rep.Damage = append(rep.Damage, Damage{Path: p, Range: Range{Off: 0, Len: fi.Size()}, Reason: reason})
			return
		}
	}
	if sc == nil {
		return
	}
	for _, l := range sc.lost {
		rep.Damage = append(rep.Damage, Damage{Path: p, Range: l, Reason: "metadata copy lost in every sidecar copy"})
	}
	switch {
	case !exists:
		rep.Damage = append(rep.Damage, Damage{Path: p, Range: Range{Off: 0, Len: sc.size}, Reason: "sstable deleted; presented from its sidecar, data blocks read as corruption"})
		return
	case fi.Size() < sc.size:
		rep.Damage = append(rep.Damage, Damage{Path: p, Range: Range{Off: fi.Size(), Len: sc.size - fi.Size()}, Reason: "sstable truncated; the lost bytes read as zeros (corruption)"})
	}
	f, err := fs.inner.Open(p)
	if err != nil {
		return
	}
	var differ []rangeCopy
	for _, c := range sc.ranges {
		if c.End() > fi.Size() {
			continue
		}
		buf := make([]byte, c.Len)
		n, err := f.ReadAt(buf, c.Off)
		if int64(n) != c.Len || (err != nil && err != io.EOF) || !bytes.Equal(buf, c.data) {
			differ = append(differ, c)
		}
	}
	_ = f.Close()
	for _, c := range differ {
		fs.repairRangeLocked(p, c)
	}
}
