package experiments

import (
	"bytes"
	"io"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/sdfvfs"
)

func TestZipfianMatchesItsDistribution(t *testing.T) {
	const seed, n, draws = 7, 1000, 200000
	t.Logf("seed %d", seed)
	z, err := newZipfian(n, ycsbZipfTheta)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		k := z.next(rng)
		if k < 0 || k >= n {
			t.Fatalf("draw %d outside [0, %d)", k, n)
		}
		counts[k]++
	}
	// Items 0 and 1 are exact in Gray's method: P(i) = (1/(i+1)^theta)/zeta(n).
	for _, i := range []int{0, 1} {
		want := 1 / math.Pow(float64(i+1), ycsbZipfTheta) / z.zetan
		got := float64(counts[i]) / draws
		sigma := math.Sqrt(want * (1 - want) / draws)
		if math.Abs(got-want) > 5*sigma {
			t.Errorf("P(%d) = %.4f, want %.4f +- %.4f", i, got, want, 5*sigma)
		}
	}
	head, tail := 0, 0
	for i := 0; i < 10; i++ {
		head += counts[i]
		tail += counts[n-10+i]
	}
	if head < 20*tail {
		t.Errorf("not skewed: first 10 items %d draws, last 10 %d", head, tail)
	}
	if _, err := newZipfian(1, 0.99); err == nil {
		t.Error("1 item accepted")
	}
	if _, err := newZipfian(10, 1.5); err == nil {
		t.Error("theta 1.5 accepted")
	}
}

func TestScrambledZipfianSpreadsHotKeys(t *testing.T) {
	s, err := newScrambledZipfian(10000)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	seen := map[int64]int{}
	for i := 0; i < 10000; i++ {
		k := s.next(rng)
		if k < 0 || k >= 10000 {
			t.Fatalf("key %d out of range", k)
		}
		seen[k]++
	}
	hottest, at := 0, int64(0)
	for k, c := range seen {
		if c > hottest {
			hottest, at = c, k
		}
	}
	if at == 0 {
		t.Errorf("hottest key is item 0: not scrambled")
	}
}

func writeFile(t *testing.T, fs vfs.FS, name string, data []byte) {
	t.Helper()
	if err := fs.MkdirAll(fs.PathDir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// NB: Pebble's MemFS scribbles on written buffers under -tags
	// invariants; write a copy.
	if _, err := f.Write(append([]byte(nil), data...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

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
		writeFile(t, inner, "db/000001.sst", data)
		writeFile(t, inner, "db/000002.log", data)
		const uber = 2e-5
		fs, err := newFlipFS(inner, uber, persistent, nil, seed)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, fs, "db/000001.sst"); !bytes.Equal(got, data) {
			t.Fatal("flips while disabled")
		}
		fs.enable(true)
		const reads = 16
		flipped := 0
		for i := 0; i < reads; i++ {
			got := readAll(t, fs, "db/000001.sst")
			stored := readAll(t, inner, "db/000001.sst")
			flipped += countDiffBits(got, stored)
			if !persistent && !bytes.Equal(stored, data) {
				t.Fatal("transient flip reached the stored file")
			}
			if !bytes.Equal(readAll(t, fs, "db/000002.log"), readAll(t, inner, "db/000002.log")) {
				t.Fatal("a non-sstable read was flipped")
			}
		}
		st := fs.Stats()
		want := uber * float64(st.SSTBitsRead)
		if math.Abs(float64(st.Flips)-want) > 5*math.Sqrt(want) {
			t.Errorf("persistent=%t: %d flips for %d bits, want %.0f", persistent, st.Flips, st.SSTBitsRead, want)
		}
		if persistent {
			if d := countDiffBits(readAll(t, inner, "db/000001.sst"), data); d == 0 {
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
	writeFile(t, inner, "n1/x/000007.sst", data)
	firstHalf := func(path string, r io.ReaderAt, size int64) ([]sdfvfs.Range, bool, error) {
		return []sdfvfs.Range{{Off: 0, Len: size / 2}}, true, nil
	}
	fs, err := newFlipFS(inner, 1e-4, false, firstHalf, 11)
	if err != nil {
		t.Fatal(err)
	}
	fs.enable(true)
	for i := 0; i < 8; i++ {
		got := readAll(t, fs, "n1/x/000007.sst")
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
	if _, err := newFlipFS(inner, 0.5, false, nil, 1); err == nil {
		t.Error("UBER 0.5 accepted")
	}
}

func TestKVRunParamsValidate(t *testing.T) {
	good := kvBaseParams(Config{Seed: 1, Quick: true})
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*kvRunParams){
		"records":  func(p *kvRunParams) { p.Records = 10 },
		"value":    func(p *kvRunParams) { p.ValueBytes = 1 << 20 },
		"shards":   func(p *kvRunParams) { p.Shards = 0 },
		"clients":  func(p *kvRunParams) { p.Clients = 1000 },
		"duration": func(p *kvRunParams) { p.Duration = time.Hour },
		"timeout":  func(p *kvRunParams) { p.OpTimeout = 0 },
		"mix":      func(p *kvRunParams) { p.Mix.ReadFraction = 2 },
	} {
		p := good
		mut(&p)
		if err := p.validate(); err == nil {
			t.Errorf("%s: bad params accepted: %s", name, p)
		}
	}
}
