package sim

import (
	"bytes"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/testseed"
	"github.com/flashmend/flashmend/internal/wear"
)

func TestZipf(t *testing.T) {
	seed := testseed.Seed(t, "SIM_SEED")
	rng := rand.New(rand.NewSource(seed))
	for _, theta := range []float64{0.9, 0.99, 1.0, 1.1} {
		z := newZipf(1000, theta)
		// Exact probabilities.
		sum := 0.0
		for i := 1; i <= 1000; i++ {
			sum += math.Pow(float64(i), -theta)
		}
		for _, i := range []int{0, 1, 9, 999} {
			if want := math.Pow(float64(i+1), -theta) / sum; math.Abs(z.probability(i)-want) > 1e-12 {
				t.Fatalf("theta %g rank %d: %g, want %g", theta, i, z.probability(i), want)
			}
		}
		const n = 200000
		counts := make([]int, 1000)
		for i := 0; i < n; i++ {
			counts[z.next(rng)]++
		}
		// The top ranks within 5 binomial standard deviations.
		for _, i := range []int{0, 1, 2, 10} {
			p := z.probability(i)
			if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(counts[i])-n*p) > 5*sd {
				t.Errorf("seed %d theta %g rank %d: %d draws, expected %.0f", seed, theta, i, counts[i], n*p)
			}
		}
	}
}

// TestProfiles checks that the synthetic Table III profiles produce what
// the table says: request count, write ratio, bytes requested.
func TestProfiles(t *testing.T) {
	if len(Profiles()) != 5 {
		t.Fatal("Table III has five traces")
	}
	for _, p := range Profiles() {
		p := p.Scaled(0.02)
		w, err := p.Workload()
		if err != nil {
			t.Fatal(err)
		}
		src, err := w.Open(1)
		if err != nil {
			t.Fatal(err)
		}
		var n, writes, bytes int64
		var last time.Duration
		objects := w.Dataset / w.ObjectBytes
		for {
			r, ok, err := src.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			n++
			if r.Write {
				writes++
			}
			bytes += r.Length
			if r.At < last || r.Length <= 0 || (r.Offset+r.Length-1)/w.ObjectBytes >= objects ||
				(p.WholeObject && (r.Offset%w.ObjectBytes != 0 || r.Length != w.ObjectBytes)) {
				t.Fatalf("%s: request %+v out of order, empty or outside the data set", p.Name, r)
			}
			last = r.At
		}
		ratio := float64(writes) / float64(n)
		mean, want := float64(bytes)/float64(n), float64(p.ReqBytes)/float64(p.Requests)
		t.Logf("%s: %d requests, write ratio %.3f, mean %.0f B (table %.0f B), %v", p.Name, n, ratio, mean, want, last.Round(time.Hour))
		if n != p.Requests || math.Abs(ratio-p.WriteRatio) > 0.01 || math.Abs(mean-want) > 0.1*want ||
			math.Abs(last.Hours()-p.Duration.Hours()) > 0.05*p.Duration.Hours() {
			t.Errorf("%s: %d requests (want %d), write ratio %.3f (want %.3f), mean %.0f B (want %.0f), last at %v",
				p.Name, n, p.Requests, ratio, p.WriteRatio, mean, want, last)
		}
	}
	if _, err := LookupProfile("tpcc"); !base.IsInvalidArgument(err) {
		t.Fatal("unknown profile accepted")
	}
}

// TestMSRTrace writes a trace in the MSR-Cambridge CSV format, reads it
// back, scans it, replays it in the simulator, and checks that malformed
// lines are refused with their line number.
func TestMSRTrace(t *testing.T) {
	p, _ := LookupProfile("mds-0")
	p = p.Scaled(0.001)
	p.Duration = 3 * time.Hour
	w, _ := p.Workload()
	src, _ := w.Open(7)
	var reqs []Request
	for {
		r, ok, err := src.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		// Spread over a large volume, as real traces are.
		r.Offset += 1 << 40
		reqs = append(reqs, r)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "mds_0.csv")
	var buf bytes.Buffer
	if err := WriteMSR(&buf, 128166372000000000, reqs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := ScanMSR(path, 128<<10)
	if err != nil {
		t.Fatal(err)
	}
	if info.Requests != int64(len(reqs)) || info.Objects == 0 || info.Duration > p.Duration*11/10 {
		t.Fatalf("scan %+v", info)
	}
	mw, err := MSRWorkload(path, 128<<10)
	if err != nil {
		t.Fatal(err)
	}
	s, err := mw.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	var got, writes int64
	for {
		r, ok, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if r.Offset >= info.Objects*(128<<10) {
			t.Fatalf("request %+v not renumbered into %d objects", r, info.Objects)
		}
		if r.Continued {
			continue
		}
		got++
		if r.Write {
			writes++
		}
	}
	if got != info.Requests || writes != info.Writes {
		t.Fatalf("replayed %d requests (%d writes), trace has %d (%d)", got, writes, info.Requests, info.Writes)
	}
	res, err := Run(t.Context(), Config{Servers: 8, Workload: mw, Policy: wear.Options{Mode: wear.ModeChameleon}, Epoch: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != info.Requests || res.Writes != info.Writes || res.HostPages == 0 {
		t.Fatalf("simulated %d requests %d writes %d pages", res.Requests, res.Writes, res.HostPages)
	}
	for name, line := range map[string]string{
		"fields":    "128166372000000000,h,0,Write,0",
		"type":      "128166372000000000,h,0,Trim,0,4096,0",
		"size":      "128166372000000000,h,0,Write,0,0,0",
		"offset":    "128166372000000000,h,0,Write,-5,4096,0",
		"timestamp": "x,h,0,Write,0,4096,0",
	} {
		bad := filepath.Join(dir, name+".csv")
		content := "128166372000000000,h,0,Read,0,4096,0\n" + line + "\n"
		if err := os.WriteFile(bad, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ScanMSR(bad, 128<<10); !base.IsInvalidArgument(err) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v", name, err)
		}
	}
	back := filepath.Join(dir, "back.csv")
	if err := os.WriteFile(back, []byte("128166372000000100,h,0,Read,0,4096,0\n128166372000000000,h,0,Read,0,4096,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ScanMSR(back, 128<<10); !base.IsInvalidArgument(err) {
		t.Errorf("time going back: %v", err)
	}
	if _, err := MSRWorkload(filepath.Join(dir, "missing.csv"), 128<<10); err == nil {
		t.Error("missing file accepted")
	}
}

func TestRing(t *testing.T) {
	for _, servers := range []int{6, 50, 1000} {
		r := newRing(servers)
		load := make([]int, servers+1)
		for id := wear.ObjectID(1); id <= 20000; id++ {
			var got []int
			r.Walk(id, func(n base.NodeID) bool {
				got = append(got, int(n))
				return len(got) < 6
			})
			if len(got) != 6 {
				t.Fatalf("%d servers: walk of %v gave %v", servers, id, got)
			}
			for i := range got {
				for j := 0; j < i; j++ {
					if got[i] == got[j] {
						t.Fatalf("walk of %v repeats %d", id, got[i])
					}
				}
			}
			load[got[0]]++
		}
		if servers == 50 {
			lo, hi := 20000, 0
			for _, l := range load[1:] {
				lo, hi = min(lo, l), max(hi, l)
			}
			t.Logf("50 servers: primary load %d..%d (mean 400)", lo, hi)
			if hi > 2*lo {
				t.Errorf("ring unbalanced: %d..%d", lo, hi)
			}
		}
	}
	// A walk over every server visits each once.
	r := newRing(20)
	seen := map[base.NodeID]bool{}
	r.Walk(3, func(n base.NodeID) bool { seen[n] = true; return true })
	if len(seen) != 20 {
		t.Fatalf("full walk visited %d of 20", len(seen))
	}
}
