package experiments

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"

	"github.com/flashmend/flashmend/internal/base"
)

// ycsbMix is a YCSB core workload's operation mix: reads and updates of
// existing records (workload A is 50/50, B is 95/5, C is read only).
type ycsbMix struct {
	Name         string
	ReadFraction float64
}

func (m ycsbMix) String() string {
	return fmt.Sprintf("%s (%.0f/%.0f read/update)", m.Name, 100*m.ReadFraction, 100*(1-m.ReadFraction))
}

var (
	ycsbA = ycsbMix{Name: "A", ReadFraction: 0.50}
	ycsbB = ycsbMix{Name: "B", ReadFraction: 0.95}
)

// ycsbZipfTheta is YCSB's default zipfian constant.
const ycsbZipfTheta = 0.99

// zipfian draws item numbers in [0, n) with P(i) proportional to
// 1/(i+1)^theta, by the rejection-free method of Gray et al. ("Quickly
// generating billion-record synthetic databases", SIGMOD 1994), which is
// also YCSB's. Go's rand.Zipf needs an exponent above 1; YCSB's is 0.99.
type zipfian struct {
	n                   int64
	theta, alpha, zetan float64
	eta, half           float64
}

func newZipfian(n int64, theta float64) (*zipfian, error) {
	if n < 2 || n > 1<<28 {
		return nil, base.InvalidArgumentf("zipfian: %d items outside [2, 2^28]", n)
	}
	if !(theta > 0 && theta < 1) {
		return nil, base.InvalidArgumentf("zipfian: theta %g outside (0, 1)", theta)
	}
	zeta := func(k int64) float64 {
		s := 0.0
		for i := int64(1); i <= k; i++ {
			s += 1 / math.Pow(float64(i), theta)
		}
		return s
	}
	z := &zipfian{n: n, theta: theta, alpha: 1 / (1 - theta), zetan: zeta(n)}
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta(2)/z.zetan)
	z.half = 1 + math.Pow(0.5, theta)
	return z, nil
}

// next draws one item; item 0 is the most popular.
func (z *zipfian) next(rng *rand.Rand) int64 {
	u := rng.Float64()
	uz := u * z.zetan
	switch {
	case uz < 1:
		return 0
	case uz < z.half:
		return 1
	}
	i := int64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(max(i, 0), z.n-1)
}

// scrambledZipfian spreads the popular items over the key space (YCSB's
// ScrambledZipfianGenerator): item i of the zipfian becomes key
// hash(i) mod n, so hot keys do not cluster in one sstable block.
type scrambledZipfian struct{ z *zipfian }

func newScrambledZipfian(n int64) (scrambledZipfian, error) {
	z, err := newZipfian(n, ycsbZipfTheta)
	return scrambledZipfian{z: z}, err
}

func (s scrambledZipfian) next(rng *rand.Rand) int64 {
	h := fnv.New64a()
	var b [8]byte
	v := uint64(s.z.next(rng))
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	h.Write(b[:])
	return int64(h.Sum64() % uint64(s.z.n))
}

// ycsbKey is record i's key (YCSB's "user" prefix, fixed width so keys sort
// by number).
func ycsbKey(i int64) []byte { return []byte(fmt.Sprintf("user%010d", i)) }

// ycsbValue is a value of size bytes for record i at version v: readable
// and checkable (the record and version are at its head).
func ycsbValue(i, v int64, size int) []byte {
	b := make([]byte, size)
	head := fmt.Sprintf("%d:%d:", i, v)
	for j := range b {
		b[j] = 'a' + byte((int64(j)+i+v)%26)
	}
	copy(b, head)
	return b
}

// ycsbSplits returns shards-1 split keys that cut n records evenly.
func ycsbSplits(n int64, shards int) []string {
	var out []string
	for s := 1; s < shards; s++ {
		out = append(out, string(ycsbKey(n*int64(s)/int64(shards))))
	}
	return out
}
