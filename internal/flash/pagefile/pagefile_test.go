package pagefile

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash/stateunit"
)

const (
	testPageBytes = 64 + 8 // data and OOB
	testPages     = 32
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, testPageBytes, testPages)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomPage(rng *rand.Rand) []byte {
	b := make([]byte, testPageBytes)
	rng.Read(b)
	return b
}

// TestPagesSurviveReopen writes random pages, reopens the directory and
// reads them back; unwritten and erased slots are not programmed and read
// as corruption.
func TestPagesSurviveReopen(t *testing.T) {
	seed := int64(20261124)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	s := open(t, dir)
	want := map[int64][]byte{}
	for _, p := range rng.Perm(testPages)[:testPages/2] {
		want[int64(p)] = randomPage(rng)
		if err := s.WritePage(int64(p), want[int64(p)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	buf := make([]byte, testPageBytes)
	for p := int64(0); p < testPages; p++ {
		ok, err := s.Programmed(p)
		if err != nil {
			t.Fatal(err)
		}
		err = s.ReadPage(p, buf)
		if w, written := want[p]; written {
			if !ok || err != nil || !bytes.Equal(buf, w) {
				t.Fatalf("page %d: programmed %t, err %v, content equal %t", p, ok, err, bytes.Equal(buf, w))
			}
			continue
		}
		if ok || !base.IsCorruption(err) {
			t.Fatalf("unwritten page %d: programmed %t, err %v", p, ok, err)
		}
	}
	// Erase the block of pages [8, 16): none of them is programmed now.
	if err := s.EraseBlock(8, 8); err != nil {
		t.Fatal(err)
	}
	for p := int64(8); p < 16; p++ {
		if ok, err := s.Programmed(p); ok || err != nil {
			t.Fatalf("erased page %d: programmed %t, err %v", p, ok, err)
		}
		if err := s.ReadPage(p, buf); !base.IsCorruption(err) {
			t.Fatalf("erased page %d read: %v", p, err)
		}
	}
}

// TestSlotDamageIsCorruption rots a byte of a slot's content and copies a
// slot to another page's place: both read as corruption, the rotten one
// with its damaged content returned.
func TestSlotDamageIsCorruption(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	a, b := randomPage(rng), randomPage(rng)
	if err := s.WritePage(3, a); err != nil {
		t.Fatal(err)
	}
	if err := s.WritePage(4, b); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "pages"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	slot := int64(HeaderBytes + testPageBytes)
	if _, err := f.WriteAt([]byte{a[5] ^ 0x10}, 3*slot+HeaderBytes+5); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, testPageBytes)
	if err := s.ReadPage(3, buf); !base.IsCorruption(err) {
		t.Fatalf("rotten slot read: %v", err)
	}
	if diff := bytes.Compare(buf[:5], a[:5]); diff != 0 || buf[5] != a[5]^0x10 {
		t.Fatalf("rotten slot: the damaged content is not what was returned")
	}
	// Page 4's slot, verbatim, in page 5's place.
	whole := make([]byte, slot)
	if _, err := f.ReadAt(whole, 4*slot); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(whole, 5*slot); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadPage(5, buf); !base.IsCorruption(err) {
		t.Fatalf("misplaced slot read: %v", err)
	}
	if err := s.ReadPage(4, buf); err != nil || !bytes.Equal(buf, b) {
		t.Fatalf("intact slot read: %v", err)
	}
}

// TestStateCopies saves records and loads every copy back, including a
// copy damaged on disk, which is returned as it is.
func TestStateCopies(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if copies, err := s.LoadState(); err != nil || len(copies) != 0 {
		t.Fatalf("new directory: %d copies, %v", len(copies), err)
	}
	for _, rec := range [][]byte{bytes.Repeat([]byte{1}, 1000), bytes.Repeat([]byte{2}, 600)} {
		if err := s.SaveState(rec); err != nil {
			t.Fatal(err)
		}
		copies, err := s.LoadState()
		if err != nil || len(copies) != stateunit.Copies {
			t.Fatalf("%d copies, %v", len(copies), err)
		}
		for i, c := range copies {
			if !bytes.Equal(c, rec) {
				t.Fatalf("copy %d: %d bytes, want the %d just saved", i, len(c), len(rec))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, StateName(1)), []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	copies, err := s.LoadState()
	if err != nil || len(copies) != stateunit.Copies || string(copies[1]) != "torn" {
		t.Fatalf("damaged copy: %d copies, %v", len(copies), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLock: a directory opens once at a time.
func TestLock(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the lock is a no-op outside Linux")
	}
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := Open(dir, testPageBytes, testPages); err == nil {
		t.Fatal("a second open of a directory in use succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, dir).Close()
}
