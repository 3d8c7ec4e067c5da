package objstore

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
)

func TestMetaFilesSurviveAnyTwoCorruptCopies(t *testing.T) {
	for mask := 0; mask < 1<<MetaCopies; mask++ {
		s := NewMemStore()
		m := NewMetaFiles(s)
		if err := m.Write("node/identity", []byte("v1")); err != nil {
			t.Fatal(err)
		}
		if err := m.Write("node/identity", []byte("identity-v2")); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, n := range CopyNames("node/identity") {
			if mask&(1<<i) != 0 {
				bad++
				if i == 1 {
					s.Delete(n) // a missing copy counts as bad too
				} else if err := s.FlipBits(n, int64(8*i+3), 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		res, err := m.Read("node/identity")
		if bad == MetaCopies {
			if mask == 0b111 && !base.IsDataLoss(err) {
				t.Fatalf("mask %03b: %v", mask, err)
			}
			continue
		}
		if err != nil || string(res.Payload) != "identity-v2" || res.Repaired != bad {
			t.Fatalf("mask %03b: %q repaired %d err %v", mask, res.Payload, res.Repaired, err)
		}
		again, err := m.Read("node/identity")
		if err != nil || again.Repaired != 0 || string(again.Payload) != "identity-v2" {
			t.Fatalf("mask %03b: second read %+v %v", mask, again, err)
		}
	}
	if _, err := NewMetaFiles(NewMemStore()).Read("x"); !IsNotFound(err) {
		t.Fatalf("missing meta: %v", err)
	}
}

func TestMetaFilesStaleCopy(t *testing.T) {
	s := NewMemStore()
	m := NewMetaFiles(s)
	m.Write("f", []byte("old"))
	old, _ := s.Get(CopyNames("f")[2])
	m.Write("f", []byte("new"))
	s.Put(CopyNames("f")[2], old) // a crash between copy writes
	res, err := m.Read("f")
	if err != nil || string(res.Payload) != "new" || res.Repaired != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestChunkStore(t *testing.T) {
	seed := int64(11)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	fault := NewFaultStore(NewMemStore(), seed)
	cs := NewChunkStore(fault)
	id := direct.ChunkID{Object: 3, Version: 4, Index: 1}
	data := make([]byte, 5000)
	rng.Read(data)
	sums := direct.Sums(id, data)

	bad := append([]byte(nil), data...)
	bad[10] ^= 1
	if err := cs.WriteChunk(id, bad, sums, false); !base.IsCorruption(err) {
		t.Fatalf("corrupt write accepted: %v", err)
	}
	if _, err := cs.ReadChunk(id); !IsNotFound(err) {
		t.Fatalf("refused write left a chunk: %v", err)
	}
	if err := cs.WriteChunk(direct.ChunkID{Object: 3, Version: 4, Index: 2}, data, sums, false); !base.IsCorruption(err) {
		t.Fatalf("misdirected write accepted: %v", err)
	}
	for _, tc := range []struct {
		data []byte
		sums []uint32
	}{{nil, nil}, {make([]byte, direct.ChunkSize+1), make([]uint32, direct.SectorsPerChunk+1)}, {data, sums[:3]}} {
		if err := cs.WriteChunk(id, tc.data, tc.sums, false); !base.IsInvalidArgument(err) {
			t.Fatalf("bad write accepted: %v", err)
		}
	}
	if err := cs.WriteChunk(id, data, sums, false); err != nil {
		t.Fatal(err)
	}
	r, err := cs.ReadChunk(id)
	if err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
		t.Fatalf("read %s %v", r, err)
	}

	// Persistent damage: corrupt after two reads, content returned.
	if err := cs.Corrupt(id, 100, 2); err != nil {
		t.Fatal(err)
	}
	r, err = cs.ReadChunk(id)
	if err != nil || !r.Corrupt || r.Transient || bytes.Equal(r.Data, data) || r.Sums == nil {
		t.Fatalf("damaged read %s %v", r, err)
	}
	if err := cs.WriteChunk(id, data, sums, true); err != nil {
		t.Fatal(err)
	}
	if r, _ = cs.ReadChunk(id); r.Corrupt {
		t.Fatal("repair did not take")
	}

	// Sums record damage.
	if err := fault.FlipBits(SumsName(id), 8*SumsOffset(id)+40, 1); err != nil {
		t.Fatal(err)
	}
	if r, _ = cs.ReadChunk(id); !r.Corrupt || r.Sums != nil {
		t.Fatalf("sums damage not reported: %s", r)
	}
	cs.WriteChunk(id, data, sums, true)

	// Transient flips: with a high UBER most reads of 5000 bytes flip, and a
	// re-read usually comes back clean.
	if err := fault.SetUBER(1e-5, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		r, err := cs.ReadChunk(id)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Corrupt && !bytes.Equal(r.Data, data) {
			t.Fatal("unverified data passed as clean")
		}
	}
	st := cs.Stats()
	if st.Transient == 0 || st.Persistent < 2 || st.Transient < st.Persistent-2 || st.Repaired != 2 || st.Rejected != 2 {
		t.Fatalf("stats %s", st)
	}
	fault.SetUBER(0, false)
	if r, _ = cs.ReadChunk(id); r.Corrupt {
		t.Fatal("transient flips damaged the store")
	}
	if err := fault.SetUBER(2, false); !base.IsInvalidArgument(err) {
		t.Fatal("bad UBER accepted")
	}

	// Local index and delete.
	info := BlobInfo{Key: "k", Object: 3, Version: 4, Redundancy: "rep", Chunks: 2, SizeBytes: 70000, Placement: []uint64{3, 1, 2}, CreatedUnixMs: 5}
	if err := cs.PutBlobInfo(info); err != nil {
		t.Fatal(err)
	}
	fault.FlipBits(CopyNames(infoName(3, 4, 0))[0], 30, 1)
	blobs, err := cs.Blobs()
	if err != nil || len(blobs) != 1 || !reflect.DeepEqual(blobs[0], info) || cs.Stats().MetaRepaired != 1 {
		t.Fatalf("blobs %v %v %s", blobs, err, cs.Stats())
	}
	if err := cs.DeleteBlob(3, 4); err != nil {
		t.Fatal(err)
	}
	if names, _ := fault.List(""); len(names) != 0 {
		t.Fatalf("left after delete: %v", names)
	}
}

func TestFaultStorePersistent(t *testing.T) {
	inner := NewMemStore()
	f := NewFaultStore(inner, 5)
	data := make([]byte, 1<<16)
	inner.Put("x", data)
	f.SetUBER(1e-4, true)
	got, _ := f.Get("x")
	f.SetUBER(0, false)
	stored, _ := inner.Get("x")
	if !bytes.Equal(got, stored) || bytes.Equal(stored, data) {
		t.Fatal("persistent flips not stored")
	}
	// Expect about 52 flips for 2^19 bits at 1e-4.
	if n := f.Flips(); n < 20 || n > 100 {
		t.Fatalf("%d flips", n)
	}
}

func TestSDFStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSDFStore(dir, SDFStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := NewChunkStore(s)
	rng := rand.New(rand.NewSource(9))
	ids := []direct.ChunkID{}
	datas := [][]byte{}
	for i := 0; i < 20; i++ {
		id := direct.ChunkID{Object: 1, Version: 1, Index: uint32(i)}
		data := make([]byte, 1+rng.Intn(direct.ChunkSize))
		rng.Read(data)
		if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
			t.Fatal(err)
		}
		ids, datas = append(ids, id), append(datas, data)
	}
	if err := cs.Corrupt(ids[3], 10, 3); err != nil {
		t.Fatal(err)
	}
	if r, err := cs.ReadChunk(ids[3]); err != nil || !r.Corrupt {
		t.Fatalf("corrupt chunk: %s %v", r, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: data kept.
	s, err = OpenSDFStore(dir, SDFStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs = NewChunkStore(s)
	for i, id := range ids {
		r, err := cs.ReadChunk(id)
		if err != nil || r.Corrupt != (i == 3) || (i != 3 && !bytes.Equal(r.Data, datas[i])) {
			t.Fatalf("chunk %d after reopen: %s %v", i, r, err)
		}
	}
	// A failed die: some chunks come back corrupt (never as good data).
	if err := s.FailDie(1); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i, id := range ids {
		r, err := cs.ReadChunk(id)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if r.Corrupt {
			lost++
		} else if !bytes.Equal(r.Data, datas[i]) {
			t.Fatalf("chunk %d: wrong data passed verification", i)
		}
	}
	t.Logf("%d of %d chunks hit by the failed die", lost, len(ids))
	if err := s.FailDie(99); !base.IsInvalidArgument(err) {
		t.Fatal(err)
	}
}

// TestSDFStoreNeverFormatsImplicitly: a device with state is formatted only
// when it is blank. Without its format marker it is mounted if its file
// system is there (the marker is restored); with no file system it is
// refused with an error that names the directory, and nothing is erased.
func TestSDFStoreNeverFormatsImplicitly(t *testing.T) {
	dir := t.TempDir()
	opts := SDFStoreOptions{Geometry: flash.SmallGeometry()}
	s, err := OpenSDFStore(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if info := s.OpenInfo(); !info.Formatted {
		t.Fatalf("blank directory: %v, want formatted", info)
	}
	cs := NewChunkStore(s)
	id := direct.ChunkID{Object: 3, Version: 4}
	data := bytes.Repeat([]byte("flash"), 1000)
	if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, sdfFormattedMarker)

	// Marker deleted: mounted, marker restored, data kept.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSDFStore(dir, opts)
	if err != nil {
		t.Fatalf("marker deleted: %v", err)
	}
	if info := s.OpenInfo(); info.Formatted || !info.MarkerRestored {
		t.Fatalf("marker deleted: %v", info)
	}
	if r, err := NewChunkStore(s).ReadChunk(id); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
		t.Fatalf("marker deleted: chunk %s %v", r, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("marker not restored: %v", err)
	}

	// Marker deleted and the page file emptied (state files kept): the
	// device has state but no file system: refused, naming the directory,
	// and its state files are left alone.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	pages := filepath.Join(dir, "flash", "pages")
	if err := os.Truncate(pages, 0); err != nil {
		t.Fatal(err)
	}
	_, err = OpenSDFStore(dir, opts)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "refusing to format") {
		t.Fatalf("state without a file system: %v", err)
	}
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatal("a refused device got a format marker")
	}
	after, err := os.ReadFile(filepath.Join(dir, "flash", "state.0"))
	if err != nil || len(after) == 0 {
		t.Fatalf("state files after a refused open: %v", err)
	}

	// With its marker, a device whose file system does not mount is an
	// error too (never a format).
	if err := os.WriteFile(marker, []byte("formatted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSDFStore(dir, opts); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "flash")) {
		t.Fatalf("marker but no file system: %v", err)
	}
}

// TestMetaFilesVote: every copy damaged, at different bits: the bit-by-bit
// vote gives the file back (and every copy is rewritten); at the same bit in
// every copy the vote gives the flipped bit, which does not verify: an
// explicit data-loss error.
func TestMetaFilesVote(t *testing.T) {
	for _, sameBit := range []bool{false, true} {
		s := NewMemStore()
		m := NewMetaFiles(s)
		if err := m.Write("i/blob/0", []byte(`{"key":"k","object":1}`)); err != nil {
			t.Fatal(err)
		}
		for i, n := range CopyNames("i/blob/0") {
			bit := int64(8*20 + i)
			if sameBit {
				bit = 8 * 20
			}
			if err := s.FlipBits(n, bit, 1); err != nil {
				t.Fatal(err)
			}
		}
		res, err := m.Read("i/blob/0")
		if sameBit {
			if !base.IsDataLoss(err) {
				t.Fatalf("same bit in every copy: %+v %v", res, err)
			}
			continue
		}
		if err != nil || string(res.Payload) != `{"key":"k","object":1}` || res.Repaired != MetaCopies {
			t.Fatalf("different bits in every copy: %+v %v", res, err)
		}
		if again, err := m.Read("i/blob/0"); err != nil || again.Repaired != 0 {
			t.Fatalf("after the vote: %+v %v", again, err)
		}
	}
}

func TestChunkCounts(t *testing.T) {
	cs := NewChunkStore(NewMemStore())
	write := func(id direct.ChunkID) {
		data := []byte("chunk data")
		if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		write(direct.ChunkID{Object: 0xabcdef0123456789, Version: 12, Shard: 4, Index: uint32(i)})
	}
	write(direct.ChunkID{Object: 7, Version: 1, Shard: 0, Index: 0})
	got, err := cs.ChunkCounts()
	if err != nil {
		t.Fatal(err)
	}
	want := map[BlobShard]int{{0xabcdef0123456789, 12, 4}: 3, {7, 1, 0}: 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}
