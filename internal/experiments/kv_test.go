package experiments

import (
	"math"
	"math/rand"
	"testing"
	"time"
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
