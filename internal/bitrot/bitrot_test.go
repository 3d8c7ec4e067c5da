package bitrot

import (
	"bytes"
	"math"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
)

// TestFlipRateAndDeterminism: the number of flipped bits matches UBER within
// a binomial 99.9% interval, every flip is a one-bit change, lengths stay,
// and a seed reproduces the same flips.
func TestFlipRateAndDeterminism(t *testing.T) {
	fs := vfs.NewMem()
	const size = 1 << 20
	orig := map[string][]byte{}
	for _, p := range []string{"a/raftlog-000002.0", "a/b/000005.sst", "a/MANIFEST-000001", "c/x.bin"} {
		d := bytes.Repeat([]byte{0x5a}, size)
		guardtest.MustWriteFile(t, fs, p, d)
		orig[p] = d
	}
	const uber = 1e-5
	rep, err := Flip(fs, "", uber, rand.New(rand.NewSource(7)))
	if err != nil {
		t.Fatal(err)
	}
	var diffBits int64
	for p, d := range orig {
		got := guardtest.MustReadFile(t, fs, p)
		if len(got) != len(d) {
			t.Fatalf("%s changed length", p)
		}
		for i := range got {
			diffBits += int64(popcount(got[i] ^ d[i]))
		}
	}
	if diffBits != rep.Flips {
		t.Fatalf("%d bits differ, report says %d", diffBits, rep.Flips)
	}
	n := float64(rep.BitsStored)
	mean, sd := n*uber, math.Sqrt(n*uber*(1-uber))
	if math.Abs(float64(rep.Flips)-mean) > 3.3*sd {
		t.Fatalf("%d flips, expected %.0f +- %.0f", rep.Flips, mean, 3.3*sd)
	}
	if rep.ByKind["raft log"] == 0 || rep.ByKind["sstable"] == 0 || rep.ByKind["pebble MANIFEST"] == 0 {
		t.Fatalf("kinds %v", rep.ByKind)
	}
	// Same seed, fresh copies: the same flips.
	fs2 := vfs.NewMem()
	for p, d := range orig {
		guardtest.MustWriteFile(t, fs2, p, d)
	}
	rep2, err := Flip(fs2, "", uber, rand.New(rand.NewSource(7)))
	if err != nil || rep2.Flips != rep.Flips {
		t.Fatalf("reproduced %d flips (%v), want %d", rep2.Flips, err, rep.Flips)
	}
	for p := range orig {
		if !bytes.Equal(guardtest.MustReadFile(t, fs, p), guardtest.MustReadFile(t, fs2, p)) {
			t.Fatalf("%s differs between runs with the same seed", p)
		}
	}
}

func popcount(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

func TestSingleFaults(t *testing.T) {
	fs := vfs.NewMem()
	data := bytes.Repeat([]byte{0xff}, 10000)
	guardtest.MustWriteFile(t, fs, "f", data)
	if err := Zero(fs, "f", 4096, 4096); err != nil {
		t.Fatal(err)
	}
	got := guardtest.MustReadFile(t, fs, "f")
	if !bytes.Equal(got[4096:8192], make([]byte, 4096)) || got[4095] != 0xff || got[8192] != 0xff {
		t.Fatal("zero changed the wrong bytes")
	}
	if err := FlipBit(fs, "f", 3); err != nil {
		t.Fatal(err)
	}
	if guardtest.MustReadFile(t, fs, "f")[0] != 0xf7 {
		t.Fatal("flip")
	}
	if err := Truncate(fs, "f", 5000); err != nil {
		t.Fatal(err)
	}
	if len(guardtest.MustReadFile(t, fs, "f")) != 5000 {
		t.Fatal("truncate")
	}
	if err := Junk(fs, "f", 0, 100, rand.New(rand.NewSource(1))); err != nil {
		t.Fatal(err)
	}
	if err := Zero(fs, "f", 6000, 10); err == nil {
		t.Fatal("fault past the end accepted")
	}
	if err := Delete(fs, "f"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat("f"); err == nil {
		t.Fatal("delete")
	}
}

func TestKind(t *testing.T) {
	for path, want := range map[string]string{
		"n1/shard-1/raft/raftlog-000003.1":                         "raft log",
		"n1/shard-1/pebble/000012.sst":                             "sstable",
		"n1/shard-1/pebble/MANIFEST-000001":                        "pebble MANIFEST",
		"n1/shard-1/pebble/marker.manifest.000002.MANIFEST-000001": "pebble marker",
		"n1/shard-1/pebble/.guardfs/MANIFEST-000001.1":             ".guardfs *.1",
		"n1/shard-1/pebble/OPTIONS-000003":                         "pebble OPTIONS",
		"n1/shard-1/pebble/temporary.000011.dbtmp":                 "pebble OPTIONS",
		// guardfs copies: the kind of the protected file, whatever its
		// number (the CORDS write-error cells of the copies were never
		// reached while each number was a kind of its own).
		"n1/shard-1/pebble/.guardfs/m.2.36eb8466ea109eb5.OPTIONS-000008":                   ".guardfs pebble OPTIONS",
		"n1/shard-1/pebble/.guardfs/m.0.36eb8466ea109eb5.temporary.000011.dbtmp":           ".guardfs pebble OPTIONS",
		"n1/shard-1/pebble/.guardfs/m.1.5820b63103d82ac7.MANIFEST-000006":                  ".guardfs pebble MANIFEST",
		"n1/shard-1/pebble/.guardfs/m.2.14817de59790e894.marker.format-version.000011.024": ".guardfs pebble marker",
		"n1/shard-1/pebble/.guardfs/s.1.14817de59790e894.000010.sst":                       ".guardfs sstable sidecar",
		".sdfvfs/dup/kv/n1/shard-1/pebble/MANIFEST-000006":                                 ".sdfvfs pebble MANIFEST",
	} {
		if got := Kind(path); got != want {
			t.Errorf("Kind(%s) = %q, want %q", path, got, want)
		}
	}
}
