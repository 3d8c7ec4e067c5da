package guardfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/guardfs"
	"github.com/flashmend/flashmend/internal/guardfs/frames"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

func writeFramed(t *testing.T, fs vfs.FS, name string, chunks ...[]byte) []byte {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, c := range chunks {
		if _, err := f.Write(c); err != nil {
			t.Fatal(err)
		}
		all = append(all, c...)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return all
}

func readAll(t *testing.T, fs vfs.FS, name string) ([]byte, error) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func mustRead(t *testing.T, fs vfs.FS, name string, want []byte) {
	t.Helper()
	got, err := readAll(t, fs, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, want %d", name, len(got), len(want))
	}
}

func list(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TestFramedLifecycle: a framed file is stored as three copies, read back
// whole, renamed and removed with them; ReservedDir is hidden.
func TestFramedLifecycle(t *testing.T) {
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{})
	if err := g.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	want := writeFramed(t, g, "/d/MANIFEST-000001", randBytes(1, 3000), randBytes(2, 10), randBytes(3, 5000))
	if names := list(t, g, "/d"); !slices.Equal(names, []string{"MANIFEST-000001"}) {
		t.Fatalf("list %v", names)
	}
	if copies := find(t, inner, "/d/"+guardfs.ReservedDir, "m.", "MANIFEST-000001"); len(copies) != 2 {
		t.Fatalf("copies %v", copies)
	}
	fi, err := g.Stat("/d/MANIFEST-000001")
	if err != nil || fi.Size() != int64(len(want)) {
		t.Fatalf("stat %v %v", fi, err)
	}
	mustRead(t, g, "/d/MANIFEST-000001", want)
	if raw, _ := inner.Stat("/d/MANIFEST-000001"); raw.Size() <= int64(len(want)) {
		t.Fatalf("the file is stored raw (%d B)", raw.Size())
	}
	if err := g.Rename("/d/MANIFEST-000001", "/d/MANIFEST-000002"); err != nil {
		t.Fatal(err)
	}
	if copies := find(t, inner, "/d/"+guardfs.ReservedDir, "m.", ""); len(copies) != 2 || !strings.HasSuffix(copies[0], "MANIFEST-000002") {
		t.Fatalf("copies after rename %v", copies)
	}
	mustRead(t, g, "/d/MANIFEST-000002", want)
	if _, err := g.Stat("/d/MANIFEST-000001"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old name: %v", err)
	}
	if err := g.Remove("/d/MANIFEST-000002"); err != nil {
		t.Fatal(err)
	}
	if left := find(t, inner, "/d/"+guardfs.ReservedDir, "", ""); len(left) != 0 {
		t.Fatalf("left behind %v", left)
	}
	if names := list(t, g, "/d"); len(names) != 0 {
		t.Fatalf("list %v", names)
	}
	if _, err := g.Create("/d/"+guardfs.ReservedDir+"/x", vfs.WriteCategoryUnspecified); !base.IsInvalidArgument(err) {
		t.Fatalf("create in the reserved dir: %v", err)
	}
}

// TestFramedRestore: a deleted file, a deleted marker (content in its
// name), a damaged file and a damaged copy come back whole, and the copies
// are rewritten.
func TestFramedRestore(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   string
		damage func(inner vfs.FS, path string, copies []string)
		list   bool // the damage is seen by List (a file gone)
	}{
		{"deleted file", "OPTIONS-000003", func(in vfs.FS, p string, _ []string) { _ = in.Remove(p) }, true},
		{"deleted marker", "marker.manifest.000002.MANIFEST-000005", func(in vfs.FS, p string, _ []string) { _ = in.Remove(p) }, true},
		{"zeroed file", "OPTIONS-000003", func(in vfs.FS, p string, _ []string) {
			_, _ = guardtest.Apply(in, p, guardtest.ZeroBlock, rand.New(rand.NewSource(1)))
		}, false},
		{"truncated file", "MANIFEST-000005", func(in vfs.FS, p string, _ []string) {
			_, _ = guardtest.Apply(in, p, guardtest.TruncateHalf, nil)
		}, false},
		{"flipped copy", "OPTIONS-000003", func(in vfs.FS, _ string, cs []string) {
			_, _ = guardtest.Apply(in, cs[0], guardtest.FlipBit, rand.New(rand.NewSource(2)))
		}, false},
		{"deleted copy", "MANIFEST-000005", func(in vfs.FS, _ string, cs []string) { _ = in.Remove(cs[1]) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			inner := vfs.NewMem()
			g := newGuard(t, inner, guardfs.Options{})
			_ = g.MkdirAll("/d", 0o755)
			p := "/d/" + c.file
			var want []byte
			if !strings.HasPrefix(c.file, "marker.") {
				want = randBytes(4, 6000)
			}
			writeFramed(t, g, p, want)
			copies := find(t, inner, "/d/"+guardfs.ReservedDir, "m.", c.file)
			before := map[string][]byte{}
			for _, f := range append([]string{p}, copies...) {
				before[f], _ = guardtest.ReadFile(inner, f)
			}
			c.damage(inner, p, copies)
			// A fresh FS: nothing cached from before the damage.
			g = newGuard(t, inner, guardfs.Options{})
			if c.list {
				if names := list(t, g, "/d"); !slices.Equal(names, []string{c.file}) {
					t.Fatalf("list %v", names)
				}
			}
			mustRead(t, g, p, want)
			s := g.Stats()
			if s.FilesRestored+s.CopiesRestored != 1 {
				t.Fatalf("restored: %s", s)
			}
			// Every stored copy is whole again (byte for byte: restores
			// write the same frames for a file written in one Write).
			for f, b := range before {
				got, err := guardtest.ReadFile(inner, f)
				if err != nil {
					t.Fatalf("%s not restored: %v", f, err)
				}
				if len(want) > 0 && !bytes.Contains(got, want[:100]) {
					t.Fatalf("%s restored without its data", f)
				}
				_ = b
			}
			if rep, err := g.Verify("/d"); err != nil || len(rep.Damage) > 0 || rep.Stats.FilesRestored+rep.Stats.CopiesRestored != 0 {
				t.Fatalf("verify after restore: %s %v", rep, err)
			}
		})
	}
}

// TestFramedLostEverywhere: bytes damaged in every copy are a corruption
// error naming the file and the range; the bytes before them read.
func TestFramedLostEverywhere(t *testing.T) {
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{FrameBytes: 512})
	_ = g.MkdirAll("/d", 0o755)
	want := writeFramed(t, g, "/d/MANIFEST-000001", randBytes(5, 4096))
	step := int64(frames.HeaderBytes + 512)
	for _, f := range append([]string{"/d/MANIFEST-000001"}, find(t, inner, "/d/"+guardfs.ReservedDir, "m.", "")...) {
		data, _ := guardtest.ReadFile(inner, f)
		data[3*step+100] ^= 4 // frame 3, data [1536, 2048)
		if err := guardtest.WriteFile(inner, f, data); err != nil {
			t.Fatal(err)
		}
	}
	r, err := g.Open("/d/MANIFEST-000001")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 4096)
	n, err := r.ReadAt(buf, 0)
	if !pebble.IsCorruptionError(err) || !base.IsCorruption(err) {
		t.Fatalf("err %v", err)
	}
	if n != 1536 || !bytes.Equal(buf[:n], want[:n]) {
		t.Fatalf("read %d bytes before the loss", n)
	}
	if msg := err.Error(); !strings.Contains(msg, "MANIFEST-000001") || !strings.Contains(msg, "[1536,2048)") {
		t.Fatalf("error does not name the file and range: %v", err)
	}
	if n, err := r.ReadAt(buf[:1000], 2048); n != 1000 || err != nil {
		t.Fatalf("after the lost frame: %d %v", n, err)
	}
	rep, err := g.Verify("/d")
	if err != nil || len(rep.Damage) != 1 || rep.Damage[0].Range != (guardfs.Range{Off: 1536, Len: 512}) {
		t.Fatalf("verify: %s %v", rep, err)
	}
}

// TestFramedIOFaults: write errors on a copy (dropped, restored at Close),
// read errors on the file itself (served from copies), lost writes on a
// copy (found by the next merge).
func TestFramedIOFaults(t *testing.T) {
	mem := vfs.NewMem()
	inner := guardtest.NewFS(mem)
	g := newGuard(t, inner, guardfs.Options{})
	_ = g.MkdirAll("/d", 0o755)
	isCopy := func(k string) func(string) bool {
		return func(p string) bool { return strings.Contains(p, "/m."+k+".") }
	}

	inner.SetRules(guardtest.Rule{Match: isCopy("1"), WriteError: true})
	want := writeFramed(t, g, "/d/OPTIONS-000001", randBytes(6, 2000), randBytes(7, 2000))
	if s := g.Stats(); s.CopyErrors == 0 || s.CopiesRestored != 1 {
		t.Fatalf("write errors: %s", s)
	}
	inner.SetRules(guardtest.Rule{Match: func(p string) bool { return p == "/d/OPTIONS-000001" }, ReadError: true})
	g = newGuard(t, inner, guardfs.Options{})
	mustRead(t, g, "/d/OPTIONS-000001", want)
	if s := g.Stats(); s.ReadErrors == 0 {
		t.Fatalf("read errors: %s", s)
	}

	inner.SetRules(guardtest.Rule{Match: isCopy("2"), LoseWrites: true})
	g = newGuard(t, inner, guardfs.Options{})
	want = writeFramed(t, g, "/d/MANIFEST-000002", randBytes(8, 7000))
	inner.SetRules()
	g = newGuard(t, inner, guardfs.Options{})
	mustRead(t, g, "/d/MANIFEST-000002", want)
	if s := g.Stats(); s.CopiesRestored != 1 || s.FramesRepaired == 0 {
		t.Fatalf("lost writes: %s", s)
	}
	// Every copy failing is an error.
	inner.SetRules(guardtest.Rule{Match: func(string) bool { return true }, WriteError: true})
	f, err := g.Create("/d/MANIFEST-000003", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("a write that no copy took succeeded")
	}
	inner.SetRules()
	_ = f.Close()
}

// writeSST writes an sstable of n keys through fs.
func writeSST(t *testing.T, fs vfs.FS, path string, n int) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	opts := guardtest.PebbleOptions(t, vfs.NewMem())
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), opts.MakeWriterOptions(0, sstable.TableFormatPebblev5))
	for i := 0; i < n; i++ {
		if err := w.Set([]byte(guardtest.KeyOf(i)), guardtest.ValueOf(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSealedSSTable: an sstable gets a sidecar when its writer closes; a
// truncated or deleted sstable is presented at its recorded size with its
// metadata from the copy; damaged metadata is served from the copy and
// repaired in place; Rename, Link and Remove carry the sidecar.
func TestSealedSSTable(t *testing.T) {
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{})
	_ = g.MkdirAll("/d", 0o755)
	writeSST(t, g, "/d/000007.sst", 3000)
	side := find(t, inner, "/d/"+guardfs.ReservedDir, "s.", "000007.sst")
	if len(side) != 2 {
		t.Fatalf("sidecars %v", side)
	}
	orig, _ := guardtest.ReadFile(inner, "/d/000007.sst")
	size := int64(len(orig))

	// Damage the footer region (metadata): reads return the original and
	// the file is repaired.
	dam := bytes.Clone(orig)
	for i := size - 60; i < size; i++ {
		dam[i] ^= 0xff
	}
	_ = guardtest.WriteFile(inner, "/d/000007.sst", dam)
	g = newGuard(t, inner, guardfs.Options{})
	mustRead(t, g, "/d/000007.sst", orig)
	if s := g.Stats(); s.RangeCopyReads == 0 || s.RangeRepairs == 0 {
		t.Fatalf("metadata damage: %s", s)
	}
	if fixed, _ := guardtest.ReadFile(inner, "/d/000007.sst"); !bytes.Equal(fixed, orig) {
		t.Fatal("not repaired in place")
	}

	// Truncated: the recorded size, zeros past the end, metadata intact.
	_ = guardtest.WriteFile(inner, "/d/000007.sst", orig[:size/2])
	g = newGuard(t, inner, guardfs.Options{})
	fi, err := g.Stat("/d/000007.sst")
	if err != nil || fi.Size() != size {
		t.Fatalf("stat of a truncated sstable: %v %v", fi, err)
	}
	got, err := readAll(t, g, "/d/000007.sst")
	if err != nil || int64(len(got)) != size || !bytes.Equal(got[:size/2], orig[:size/2]) || !bytes.Equal(got[size-60:], orig[size-60:]) {
		t.Fatalf("truncated read: %d bytes, %v", len(got), err)
	}
	if s := g.Stats(); s.ZeroFilledBytes == 0 {
		t.Fatalf("no zero fill: %s", s)
	}
	rep, err := g.Verify("/d")
	if err != nil || len(rep.Damage) != 1 || !strings.Contains(rep.Damage[0].Reason, "truncated") {
		t.Fatalf("verify of a truncated sstable: %s %v", rep, err)
	}

	// Deleted: listed and opened at its recorded size.
	_ = inner.Remove("/d/000007.sst")
	g = newGuard(t, inner, guardfs.Options{})
	if names := list(t, g, "/d"); !slices.Equal(names, []string{"000007.sst"}) {
		t.Fatalf("list %v", names)
	}
	if fi, err := g.Stat("/d/000007.sst"); err != nil || fi.Size() != size {
		t.Fatalf("stat of a deleted sstable: %v %v", fi, err)
	}
	rep, err = g.Verify("/d")
	if err != nil || len(rep.Damage) != 1 || !strings.Contains(rep.Damage[0].Reason, "deleted") {
		t.Fatalf("verify of a deleted sstable: %s %v", rep, err)
	}
	if err := g.Remove("/d/000007.sst"); err != nil {
		t.Fatal(err)
	}
	if left := find(t, inner, "/d/"+guardfs.ReservedDir, "", ""); len(left) != 0 {
		t.Fatalf("left behind %v", left)
	}

	// Rename and Link carry the sidecar; removing one link keeps the other's.
	writeSST(t, g, "/d/patch-1.sst", 500)
	if err := g.Rename("/d/patch-1.sst", "/d/000010.sst"); err != nil {
		t.Fatal(err)
	}
	if err := g.MkdirAll("/e", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.LinkOrCopy(g, "/d/000010.sst", "/e/000011.sst"); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove("/d/000010.sst"); err != nil {
		t.Fatal(err)
	}
	if n := len(find(t, inner, "/e/"+guardfs.ReservedDir, "s.", "000011.sst")); n != 2 {
		t.Fatalf("%d sidecars after link", n)
	}
	_ = inner.Remove("/e/000011.sst")
	g = newGuard(t, inner, guardfs.Options{})
	if fi, err := g.Stat("/e/000011.sst"); err != nil || fi.Size() == 0 {
		t.Fatalf("linked sstable not presented: %v %v", fi, err)
	}
}

// TestLazySeal: an sstable written without guardfs gets its sidecar at its
// first open through guardfs (and Verify seals the rest).
func TestLazySeal(t *testing.T) {
	inner := vfs.NewMem()
	_ = inner.MkdirAll("/d", 0o755)
	writeSST(t, inner, "/d/000001.sst", 1000)
	writeSST(t, inner, "/d/000002.sst", 1000)
	g := newGuard(t, inner, guardfs.Options{})
	f, err := g.Open("/d/000001.sst")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if n := len(find(t, inner, "/d/"+guardfs.ReservedDir, "s.", "000001.sst")); n != 2 {
		t.Fatalf("%d sidecars after open", n)
	}
	rep, err := g.Verify("/d")
	if err != nil || rep.Sealed != 2 || rep.Stats.SidecarsWritten != 1 || len(rep.Damage) != 0 {
		t.Fatalf("verify: %s %v", rep, err)
	}
	// An sstable whose metadata does not verify gets no sidecar and is
	// reported.
	orig, _ := guardtest.ReadFile(inner, "/d/000002.sst")
	_ = g.Remove("/d/000002.sst")
	orig[len(orig)-200] ^= 1
	_ = guardtest.WriteFile(inner, "/d/000002.sst", orig)
	rep, err = g.Verify("/d")
	if err != nil || len(rep.Damage) != 1 || rep.Stats.SealErrors != 1 {
		t.Fatalf("verify of a damaged unsealed sstable: %s %v", rep, err)
	}
}

// TestSealFromWrites: the sidecar of a new sstable is made from the bytes
// its writer wrote, not from a read of the new file: a read there could
// meet damage the write did not make (a flip on read that the device
// keeps), and the table's metadata would then have no copy at all. Here
// every read of the new table fails while it is written and sealed; it is
// sealed all the same, and metadata damaged afterwards reads back from the
// copy.
func TestSealFromWrites(t *testing.T) {
	mem := vfs.NewMem()
	inner := guardtest.NewFS(mem)
	g := newGuard(t, inner, guardfs.Options{})
	_ = g.MkdirAll("/d", 0o755)
	inner.SetRules(guardtest.Rule{Match: func(p string) bool { return p == "/d/000009.sst" }, ReadError: true})
	writeSST(t, g, "/d/000009.sst", 3000)
	inner.SetRules()
	if s := g.Stats(); s.SidecarsWritten != 1 || s.SealsFromWrites != 1 || s.SealErrors != 0 {
		t.Fatalf("sealing a table no read reaches: %s", s)
	}
	if side := find(t, mem, "/d/"+guardfs.ReservedDir, "s.", "000009.sst"); len(side) != 2 {
		t.Fatalf("sidecars %v", side)
	}
	orig, _ := guardtest.ReadFile(mem, "/d/000009.sst")
	dam := bytes.Clone(orig)
	for i := len(dam) - 300; i < len(dam); i++ {
		dam[i] ^= 0x5a
	}
	_ = guardtest.WriteFile(mem, "/d/000009.sst", dam)
	g = newGuard(t, inner, guardfs.Options{})
	mustRead(t, g, "/d/000009.sst", orig)
	if s := g.Stats(); s.RangeCopyReads == 0 {
		t.Fatalf("damaged metadata not served from the copy: %s", s)
	}
}

// TestIngestThroughGuardfs: an sstable written through guardfs and
// ingested (linked into the store) keeps its sidecar under its new name;
// deleting it afterwards leaves a store that opens and reports corruption
// for those keys.
func TestIngestThroughGuardfs(t *testing.T) {
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{})
	db, err := pebble.Open("/db", guardtest.PebbleOptions(t, g))
	if err != nil {
		t.Fatal(err)
	}
	writeSST(t, g, "/db/patch-000001.sst", 300)
	if _, err := db.IngestAndExcise(context.Background(), []string{"/db/patch-000001.sst"}, nil, nil,
		pebble.KeyRange{Start: []byte(guardtest.KeyOf(0)), End: []byte(guardtest.KeyOf(300))}); err != nil {
		t.Fatal(err)
	}
	// Pebble removed the original (and guardfs its sidecar).
	if left := find(t, inner, "/db/"+guardfs.ReservedDir, "s.", "patch-000001.sst"); len(left) != 0 {
		t.Fatalf("sidecars of the removed original: %v", left)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ssts := find(t, inner, "/db", "", ".sst")
	if len(ssts) != 1 || len(find(t, inner, "/db/"+guardfs.ReservedDir, "s.", inner.PathBase(ssts[0]))) != 2 {
		t.Fatalf("ingested %v without its sidecar", ssts)
	}
	_ = inner.Remove(ssts[0])
	want := guardtest.Dataset{}
	for i := 0; i < 300; i++ {
		want[guardtest.KeyOf(i)] = guardtest.ValueOf(i, 1)
	}
	o := guardtest.ReadBack(t, newGuard(t, inner, guardfs.Options{}), "/db", want)
	if !o.Opened || len(o.Bad) > 0 || o.Corrupt != 300 {
		t.Fatalf("%s", o)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []guardfs.Options{{Copies: 4}, {Copies: -1}, {FrameBytes: 32}, {FrameBytes: 8192}} {
		if _, err := guardfs.New(vfs.NewMem(), o); !base.IsInvalidArgument(err) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	g, err := guardfs.New(vfs.NewMem(), guardfs.Options{})
	if err != nil || g.Options().Copies != 3 || g.Options().FrameBytes != 512 {
		t.Fatalf("defaults: %+v %v", g.Options(), err)
	}
}

// TestFramedNothingVerifies: when no copy holds a frame of the file, it is
// not an empty file: Open fails as corruption, Verify reports it, and the
// copies are left as they are.
func TestFramedNothingVerifies(t *testing.T) {
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{})
	_ = g.MkdirAll("/d", 0o755)
	writeFramed(t, g, "/d/MANIFEST-000001", randBytes(9, 900))
	stored := append([]string{"/d/MANIFEST-000001"}, find(t, inner, "/d/"+guardfs.ReservedDir, "m.", "")...)
	for _, f := range stored {
		data, _ := guardtest.ReadFile(inner, f)
		clear(data)
		_ = guardtest.WriteFile(inner, f, data)
	}
	g = newGuard(t, inner, guardfs.Options{})
	if _, err := g.Open("/d/MANIFEST-000001"); !pebble.IsCorruptionError(err) {
		t.Fatalf("open: %v", err)
	}
	rep, err := g.Verify("/d")
	if err != nil || len(rep.Damage) != 1 || rep.Stats.FilesRestored+rep.Stats.CopiesRestored != 0 {
		t.Fatalf("verify: %s %v", rep, err)
	}
	for _, f := range stored {
		if data, _ := guardtest.ReadFile(inner, f); len(data) == 0 || bytes.Count(data, []byte{0}) != len(data) {
			t.Fatalf("%s was rewritten", f)
		}
	}
}

// TestSealedWriteThrough: bytes written through guardfs into an sstable's
// metadata (tools plant damage this way) are what reads return: the copy
// follows the write (the file is sealed again, or loses its sidecar if its
// metadata no longer verifies), it never undoes it.
func TestSealedWriteThrough(t *testing.T) {
	inner := vfs.NewMem()
	g := newGuard(t, inner, guardfs.Options{})
	_ = g.MkdirAll("/d", 0o755)
	writeSST(t, g, "/d/000001.sst", 1000)
	orig, _ := guardtest.ReadFile(inner, "/d/000001.sst")
	for _, at := range []int64{int64(len(orig)) - 30, int64(len(orig)) - 300} { // footer, then a metadata block
		f, err := g.OpenReadWrite("/d/000001.sst", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x5a
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		orig[at] = b[0]
		mustRead(t, newGuard(t, inner, guardfs.Options{}), "/d/000001.sst", orig)
	}
}
