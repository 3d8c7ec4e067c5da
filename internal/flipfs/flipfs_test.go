package flipfs

import (
	"bytes"
	"io"
	"math"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

func countDiffBits(a, b []byte) int {
	n := 0
	for i := range a {
		x := a[i] ^ b[i]
		for ; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

func TestFlipFSRateAndKinds(t *testing.T) {
	const seed = 3
	t.Logf("seed %d", seed)
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(seed)).Read(data)
	for _, persistent := range []bool{false, true} {
		inner := vfs.NewMem()
		guardtest.MustWriteFile(t, inner, "db/000001.sst", data)
		guardtest.MustWriteFile(t, inner, "db/000002.log", data)
		const uber = 2e-5
		fs, err := New(inner, Options{UBER: uber, Persistent: persistent, ProtectMeta: nil, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if got := guardtest.MustReadFile(t, fs, "db/000001.sst"); !bytes.Equal(got, data) {
			t.Fatal("flips while disabled")
		}
		fs.Enable(true)
		const reads = 16
		flipped := 0
		for i := 0; i < reads; i++ {
			got := guardtest.MustReadFile(t, fs, "db/000001.sst")
			stored := guardtest.MustReadFile(t, inner, "db/000001.sst")
			flipped += countDiffBits(got, stored)
			if !persistent && !bytes.Equal(stored, data) {
				t.Fatal("transient flip reached the stored file")
			}
			if !bytes.Equal(guardtest.MustReadFile(t, fs, "db/000002.log"), guardtest.MustReadFile(t, inner, "db/000002.log")) {
				t.Fatal("a non-sstable read was flipped")
			}
		}
		st := fs.Stats()
		want := uber * float64(st.SSTBitsRead)
		if math.Abs(float64(st.Flips)-want) > 5*math.Sqrt(want) {
			t.Errorf("persistent=%t: %d flips for %d bits, want %.0f", persistent, st.Flips, st.SSTBitsRead, want)
		}
		if persistent {
			if d := countDiffBits(guardtest.MustReadFile(t, inner, "db/000001.sst"), data); d == 0 {
				t.Error("persistent flips left the stored file intact")
			}
		} else if int64(flipped) != st.Flips {
			t.Errorf("transient: %d bits differ from the stored file, %d flips counted", flipped, st.Flips)
		}
	}
}

func TestFlipFSProtectedMetadataAbsorbsFlips(t *testing.T) {
	inner := vfs.NewMem()
	data := make([]byte, 256<<10)
	guardtest.MustWriteFile(t, inner, "n1/x/000007.sst", data)
	firstHalf := func(path string, r io.ReaderAt, size int64) ([]sdfvfs.Range, bool, error) {
		return []sdfvfs.Range{{Off: 0, Len: size / 2}}, true, nil
	}
	fs, err := New(inner, Options{UBER: 1e-4, Persistent: false, ProtectMeta: firstHalf, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	fs.Enable(true)
	for i := 0; i < 8; i++ {
		got := guardtest.MustReadFile(t, fs, "n1/x/000007.sst")
		if countDiffBits(got[:len(got)/2], data[:len(data)/2]) != 0 {
			t.Fatalf("read %d: a flip landed in protected metadata: %v", i, fs.Stats())
		}
	}
	st := fs.Stats()
	if st.Flips == 0 || st.MetaAbsorbed == 0 {
		t.Fatalf("no flips or none absorbed: %v", st)
	}
	if st.PerNode["n1"] != st.Flips {
		t.Errorf("flips not attributed to n1: %v", st)
	}
	if _, err := New(inner, Options{UBER: 0.5, Persistent: false, ProtectMeta: nil, Seed: 1}); err == nil {
		t.Error("UBER 0.5 accepted")
	}
}
