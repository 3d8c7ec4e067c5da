package objstore

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/bitrot"
)

// Fuzz targets for the decoders of bytes a node reads back from its store:
// the three-copy metadata files (MetaFiles, which hold the node identity,
// the local index entries and the KV layout; sumsrec fuzzes the sums
// records).
// Seed corpora are in testdata/fuzz/; `go test` runs them, `flashmend
// torture fuzz` (or go test -fuzz=FuzzX) explores further.

// FuzzMetaFiles: three copies of a metadata file, each damaged by its own
// mask (or deleted): Read returns the payload that was written, or a
// corruption error; never other bytes. With one undamaged copy it must
// succeed and leave every copy repaired.
func FuzzMetaFiles(f *testing.F) {
	f.Add([]byte(`{"node_id":3,"format_version":1}`), []byte{4, 0, 1}, []byte{}, []byte{}, uint8(0))
	f.Add([]byte("x"), []byte{4, 0, 1}, []byte{4, 0, 1}, []byte{4, 0, 1}, uint8(0))
	f.Add([]byte("payload"), []byte{4, 0, 1}, []byte{5, 0, 1}, []byte{6, 0, 1}, uint8(0))
	f.Add([]byte{}, []byte{0, 0, 0xff, 0xff}, []byte{}, []byte{}, uint8(5))
	f.Fuzz(func(t *testing.T, payload, m0, m1, m2 []byte, deleted uint8) {
		store := NewMemStore()
		meta := NewMetaFiles(store)
		const name = "node/identity"
		if err := meta.Write(name, payload); err != nil {
			t.Fatal(err)
		}
		intact := 0
		present := 0
		for i, mask := range [][]byte{m0, m1, m2} {
			cn := metaCopyName(name, i)
			if deleted&(1<<i) != 0 {
				if err := store.Delete(cn); err != nil {
					t.Fatal(err)
				}
				continue
			}
			present++
			b, err := store.Get(cn)
			if err != nil {
				t.Fatal(err)
			}
			if !bitrot.XORAt(b, mask) {
				intact++
				continue
			}
			if err := store.Put(cn, b); err != nil {
				t.Fatal(err)
			}
		}
		res, err := meta.Read(name)
		switch {
		case present == 0:
			if !IsNotFound(err) {
				t.Fatalf("no copy left: Read returned %v", err)
			}
			return
		case err != nil && intact > 0:
			t.Fatalf("%d intact copies, Read failed: %v", intact, err)
		case err != nil:
			if !base.IsCorruption(err) {
				t.Fatalf("every copy damaged: error is not a corruption: %v", err)
			}
			return
		}
		if !bytes.Equal(res.Payload, payload) {
			t.Fatalf("Read returned %q, wrote %q", res.Payload, payload)
		}
		// Every copy is good again: a second read repairs nothing.
		again, err := meta.Read(name)
		if err != nil || again.Repaired != 0 || !bytes.Equal(again.Payload, payload) {
			t.Fatalf("after repair: %+v %v", again, err)
		}
	})
}

// eioStore fails reads of one file with EIO, as a bad sector does.
type eioStore struct {
	*MemStore
	bad string
}

func (s *eioStore) Get(name string) ([]byte, error) {
	if name == s.bad {
		return nil, fmt.Errorf("read %s: %w", name, syscall.EIO)
	}
	return s.MemStore.Get(name)
}

// TestMetaFilesReadErrorOnOneCopyServesTheOthers: an EIO reading one of
// the three copies (a bad sector under it) is an unreadable copy, rewritten
// from the good ones, not an error for the whole file. Found by the
// torture harness's CORDS sweep (`flashmend torture cords`, node identity
// x EIO read: the node did not start and was declared dead).
func TestMetaFilesReadErrorOnOneCopyServesTheOthers(t *testing.T) {
	st := &eioStore{MemStore: NewMemStore()}
	meta := NewMetaFiles(st)
	if err := meta.Write("node/identity", []byte(`{"node_id":4}`)); err != nil {
		t.Fatal(err)
	}
	st.bad = metaCopyName("node/identity", 1)
	res, err := meta.Read("node/identity")
	if err != nil || string(res.Payload) != `{"node_id":4}` || res.Repaired != 1 {
		t.Fatalf("one copy unreadable: %+v %v", res, err)
	}
	// Every copy unreadable: the device's error, not a data loss.
	for i := 0; i < MetaCopies; i++ {
		st.bad = metaCopyName("node/identity", i)
		if i > 0 {
			st.MemStore.Delete(metaCopyName("node/identity", i-1))
		}
	}
	if _, err := meta.Read("node/identity"); !errors.Is(err, syscall.EIO) || base.IsDataLoss(err) {
		t.Fatalf("last copy unreadable, others gone: %v", err)
	}
}
