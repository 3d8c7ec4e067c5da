package filestore

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/sumsrec"
	"github.com/flashmend/flashmend/internal/testseed"
)

// packModel is what a test expects the store to hold: member name ->
// content (absent: deleted or never written).
type packModel map[string][]byte

// checkPackModel compares every name of names with the model; pending, when
// not empty, is the one name whose write was cut by the crash: it may hold
// its old content (before) or its new one (after).
func checkPackModel(t *testing.T, s *Store, names []string, want packModel, pending string, before, after []byte, afterSet bool) {
	t.Helper()
	for _, n := range names {
		got, err := s.Get(n)
		if err != nil && !objstore.IsNotFound(err) {
			t.Fatalf("%s: %v", n, err)
		}
		present := err == nil
		if n == pending {
			okOld := (before == nil && !present) || (before != nil && present && bytes.Equal(got, before))
			okNew := (!afterSet && !present) || (afterSet && present && bytes.Equal(got, after))
			if !okOld && !okNew {
				t.Fatalf("%s (written at the crash): %d bytes present=%v, neither its old nor its new content", n, len(got), present)
			}
			continue
		}
		w, ok := want[n]
		if ok != present || (ok && !bytes.Equal(got, w)) {
			t.Fatalf("%s: present=%v (%d bytes), want present=%v (%d bytes)", n, present, len(got), ok, len(w))
		}
	}
	list, err := s.List("d/")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range list {
		if _, ok := want[n]; !ok && n != pending {
			t.Fatalf("List lists %s, which the model does not hold", n)
		}
	}
}

// A crash in the middle of any pack write (a record appended, a pack file
// created, a compaction) leaves, after a restart, every acknowledged write
// as it was acknowledged, the cut write either done or not, and a pack that
// takes further writes and survives a second restart. Seeded: the
// operations, the write the crash cuts and how much of it lands come from
// the seed printed.
func TestPackCrashTornAppends(t *testing.T) {
	seed := testseed.Seed(t, "OBJSTORE_SEED")
	rng := rand.New(rand.NewSource(seed))
	var names []string
	for b := 0; b < 2; b++ {
		for m := 0; m < 6; m++ {
			names = append(names, fmt.Sprintf("d/%016x.1/0.%d", b, m))
		}
		for g := 0; g < 2; g++ {
			names = append(names, fmt.Sprintf("k/%016x.1/0.g%d", b, g))
		}
	}
	torn := 0
	for trial := 0; trial < 60; trial++ {
		dir := t.TempDir()
		s, err := Open(dir, trial%10 == 0)
		if err != nil {
			t.Fatal(err)
		}
		s.packs.compactMinDead = int64(1 + rng.Intn(60_000))
		s.packs.maxOpen = 1 + rng.Intn(3)
		model := packModel{}
		cut := 1 + rng.Intn(60)
		writes, crashed := 0, false
		s.torn = func(name string, size int) (int, bool) {
			if crashed {
				return 0, false
			}
			writes++
			if writes != cut {
				return 0, false
			}
			crashed = true
			return rng.Intn(size + 1), true
		}
		pending, before, after, afterSet := "", []byte(nil), []byte(nil), false
		for op := 0; op < 200 && !crashed; op++ {
			n := names[rng.Intn(len(names))]
			old, had := model[n]
			var next []byte
			set := true
			var err error
			switch r := rng.Intn(10); {
			case r < 2 && had:
				set = false
				err = s.Delete(n)
			case n[0] == 'k' && r < 6:
				off := len(old) + rng.Intn(3)*sumsrec.Size
				rec := make([]byte, sumsrec.Size)
				rng.Read(rec)
				next = append(append(append([]byte(nil), old...), make([]byte, off-len(old))...), rec...)
				err = s.WriteFresh(n, int64(off), rec)
			default:
				next = make([]byte, 1+rng.Intn(20_000))
				rng.Read(next)
				if had {
					err = s.Put(n, next)
				} else {
					err = s.Create(n, next)
				}
			}
			if err != nil {
				if err != errTorn {
					t.Fatalf("trial %d op %d %s: %v", trial, op, n, err)
				}
				pending, before, after, afterSet = n, nil, next, set
				if had {
					before = old
				}
				break
			}
			if set {
				model[n] = next
			} else {
				delete(model, n)
			}
		}
		if !crashed {
			s.Close()
			continue
		}
		torn++
		// Restart: a new store over the same files (the crashed one is
		// abandoned, as a dead process's would be).
		s2, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		checkPackModel(t, s2, names, model, pending, before, after, afterSet)
		// Settle the cut write as the store now holds it, then go on.
		if pending != "" {
			if got, err := s2.Get(pending); err == nil {
				model[pending] = got
			} else {
				delete(model, pending)
			}
		}
		for op := 0; op < 40; op++ {
			n := names[rng.Intn(len(names))]
			data := make([]byte, 1+rng.Intn(20_000))
			rng.Read(data)
			if err := s2.Put(n, data); err != nil {
				t.Fatalf("trial %d after the restart: %s: %v", trial, n, err)
			}
			model[n] = data
		}
		s2.Close()
		s3, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		checkPackModel(t, s3, names, model, "", nil, nil, false)
		s3.Close()
		s.Close()
	}
	if torn < 20 {
		t.Fatalf("only %d of 60 trials crashed", torn)
	}
}

// packRecordOffsets returns, per member, the offset of its latest record's
// header in its pack file.
func packRecordOffsets(t *testing.T, s *Store, key string) map[string]int64 {
	t.Helper()
	p, err := s.lockedPack(key, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.mu.Unlock()
	out := map[string]int64{}
	for m, e := range p.live {
		out[m] = e.off - recordHeaderSize - int64(len(m))
	}
	return out
}

// A damaged record header in the middle of a pack costs the member it
// belongs to (missing: the cluster re-creates it), not the records after
// it; a damaged header of the last record is a torn tail. Neither returns
// wrong data.
func TestPackDamagedHeaderSkipped(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	const key = "d/0000000000000007.1/0"
	want := map[string][]byte{}
	for i := 0; i < 8; i++ {
		n := fmt.Sprintf("%s.%d", key, i)
		want[n] = bytes.Repeat([]byte{byte(i + 1)}, 1000+i)
		if err := s.Create(n, want[n]); err != nil {
			t.Fatal(err)
		}
	}
	offs := packRecordOffsets(t, s, key)
	s.Close()
	path := filepath.Join(dir, filepath.FromSlash(key)) + packSuffix
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[offs["3"]+9] ^= 0x10  // the length field of member 3's header
	raw[offs["7"]+17] ^= 0x01 // the CRC of the last record's header
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var logged []string
	s2.SetLogf(func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	for n, w := range want {
		got, err := s2.Get(n)
		switch n {
		case key + ".3", key + ".7":
			if !objstore.IsNotFound(err) {
				t.Fatalf("%s (damaged header): %d bytes, %v; want not found", n, len(got), err)
			}
		default:
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("%s: %d bytes, %v", n, len(got), err)
			}
		}
	}
	if st := s2.PackStats(); st.DamagedRegions != 1 || st.TornTails != 1 {
		t.Fatalf("stats %s, want one damaged region and one torn tail", st)
	}
	// Both are said, not only counted.
	if len(logged) != 2 || !strings.Contains(logged[0], "skipped") || !strings.Contains(logged[1], "cut off") {
		t.Fatalf("log: %q", logged)
	}
	// The pack takes new records after the truncation and keeps them.
	if err := s2.Create(key+".7", want[key+".7"]); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s3, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if got, err := s3.Get(key + ".7"); err != nil || !bytes.Equal(got, want[key+".7"]) {
		t.Fatalf("rewritten member after a restart: %d bytes, %v", len(got), err)
	}
}

// Rewrites leave dead records that compaction reclaims (a new file renamed
// over the old: the content survives a restart); deleting every member
// removes the pack file and its directory.
func TestPackCompactionAndDelete(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	const key = "k/0000000000000009.3/2"
	path := filepath.Join(dir, filepath.FromSlash(key)) + packSuffix
	rng := rand.New(rand.NewSource(1))
	want := map[string][]byte{}
	for round := 0; round < 40; round++ {
		for i := 0; i < 4; i++ {
			n := fmt.Sprintf("%s.g%d", key, i)
			want[n] = make([]byte, 60_000)
			rng.Read(want[n])
			if err := s.Put(n, want[n]); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.PackStats()
	if st.Compactions == 0 || st.ReclaimedBytes < 8<<20 {
		t.Fatalf("40 rewrites of 4 members: %s", st)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Dead records are allowed up to the live bytes or packCompactMinDead,
	// whichever is more, plus the record that went past it.
	if live := int64(4 * 60_000); fi.Size() > live+max(live, packCompactMinDead)+60_100 {
		t.Fatalf("pack of 4 live members of 60000 bytes holds %d bytes", fi.Size())
	}
	s.Close()
	s2, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range want {
		if got, err := s2.Get(n); err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s after compaction and restart: %d bytes, %v", n, len(got), err)
		}
	}
	if err := s2.Compact(0); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != packHeaderSize+4*(recordHeaderSize+2+60_000) {
		t.Fatalf("fully compacted pack: %d bytes", fi.Size())
	}
	for n := range want {
		if err := s2.Delete(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("the emptied pack's directory remains: %v", err)
	}
	if names, err := s2.List("k/"); err != nil || len(names) != 0 {
		t.Fatalf("List after deleting everything: %v %v", names, err)
	}
}

// Concurrent writers, readers and deleters over more packs than the store
// keeps open (race detector).
func TestPackConcurrent(t *testing.T) {
	s, err := Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.packs.maxOpen = 3
	s.packs.compactMinDead = 4096
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < 300; i++ {
				n := fmt.Sprintf("d/%016x.1/%d.%d", rng.Intn(6), w, rng.Intn(4))
				data := bytes.Repeat([]byte{byte(w), byte(i)}, 1+rng.Intn(3000))
				if err := s.Put(n, data); err != nil {
					errs <- err
					return
				}
				got, err := s.Get(n)
				if err != nil || !bytes.Equal(got, data) {
					errs <- fmt.Errorf("%s: read back %d bytes, %v", n, len(got), err)
					return
				}
				if rng.Intn(5) == 0 {
					if err := s.Delete(n); err != nil {
						errs <- err
						return
					}
				}
				if _, err := s.List("d/"); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// FuzzPackLoad: any bytes in a pack file load without a panic; every member
// the index lists reads back; and loading again what the first load left
// (its torn tail cut off) finds the same members with the same contents.
func FuzzPackLoad(f *testing.F) {
	const key = "d/0000000000000001.1/0"
	good := append([]byte(nil), packHeader(key)...)
	for i, m := range []string{"0", "1", "0", "2"} {
		good = append(good, encodeRecord(key, recordPut, m, bytes.Repeat([]byte{byte(i)}, 100*i+1))...)
	}
	good = append(good, encodeRecord(key, recordDelete, "1", nil)...)
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add(append(append([]byte(nil), good[:40]...), good[60:]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, file []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, filepath.FromSlash(key)) + packSuffix
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		read := func() map[string]string {
			s, err := Open(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			names, err := s.List("d/")
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, n := range names {
				b, err := s.Get(n)
				if err != nil {
					t.Fatalf("%s listed but not read: %v", n, err)
				}
				out[n] = string(b)
			}
			return out
		}
		first := read()
		second := read()
		if len(first) != len(second) {
			t.Fatalf("first load %d members, second %d", len(first), len(second))
		}
		for n, b := range first {
			if second[n] != b {
				t.Fatalf("%s differs between two loads", n)
			}
		}
	})
}
