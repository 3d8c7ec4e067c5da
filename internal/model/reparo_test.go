package model

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

// TestReparoTables reproduces the printed digits of paper 003 Tables 1 and 2.
func TestReparoTables(t *testing.T) {
	wantIDR := []string{"33.33", "14.29", "6.67", "3.23", "1.59", "0.79"}
	wantCDR := []string{"6.67", "3.23", "1.59", "0.79", "0.39", "0.20"}
	for i, x := range reparoDiesPerCore {
		idr, err := IDRUtilizationIncrease(x)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%.2f", 100*idr); got != wantIDR[i] {
			t.Errorf("Table 1, %d dies: %s; paper %s", x, got, wantIDR[i])
		}
		cdr, err := CDRUtilizationIncrease(reparoTableCores, x)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%.2f", 100*cdr); got != wantCDR[i] {
			t.Errorf("Table 2, %d dies: %s; paper %s", x, got, wantCDR[i])
		}
		// The table entry is what the full adjustment gives, for victim and
		// helper alike.
		adj, err := SpaceLayout{Cores: 4, DiesPerCore: x, LogicalSpace: 1000, DieCapacity: 100}.Adjust()
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []float64{adj.VictimUtilization, adj.HelperUtilization} {
			if got := u/adj.UtilizationBefore - 1; math.Abs(got-cdr) > 1e-12 {
				t.Errorf("%d dies: adjusted increase %g; want %g", x, got, cdr)
			}
		}
		if got := adj.VictimUtilizationIDR/adj.UtilizationBefore - 1; math.Abs(got-idr) > 1e-12 {
			t.Errorf("%d dies: IDR increase %g; want %g", x, got, idr)
		}
	}
}

// TestReparoEq3 checks that alpha from eq. 4 solves eq. 3 for many layouts.
func TestReparoEq3(t *testing.T) {
	seed := int64(3)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < 200; i++ {
		l := SpaceLayout{Cores: 2 + rng.Intn(15), DiesPerCore: 2 + rng.Intn(127), DieCapacity: 1 + rng.Float64()*1000}
		l.LogicalSpace = l.DieCapacity * float64(l.Cores*l.DiesPerCore-1) * (0.1 + 0.9*rng.Float64())
		adj, err := l.Adjust()
		if err != nil {
			t.Fatalf("%v: %v", l, err)
		}
		n, perCoreDies := float64(l.Cores), float64(l.DiesPerCore)
		lsh := l.LogicalSpace / n
		left := (lsh + adj.Alpha) / perCoreDies
		right := (lsh - (n-1)*adj.Alpha) / (perCoreDies - 1)
		if math.Abs(left-right) > 1e-9*left {
			t.Fatalf("%v: eq. 3 sides %g != %g", l, left, right)
		}
		if total := adj.HelperLogicalAfter*(n-1) + adj.VictimLogicalAfter; math.Abs(total-l.LogicalSpace) > 1e-9*total {
			t.Fatalf("%v: adjustment changes the logical space to %g", l, total)
		}
	}
}

// TestReparoFigure8 reproduces the worked example of section 5.2.
func TestReparoFigure8(t *testing.T) {
	adj, err := Figure8Layout().Adjust()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  float64
		want string
	}{
		{"alpha", adj.Alpha, "1"},
		{"U before", adj.UtilizationBefore, "0.625"},
		{"U helper after", adj.HelperUtilization, "0.67"},
		{"U victim after", adj.VictimUtilization, "0.67"},
		{"helper LS", adj.HelperLogicalAfter, "16"},
		{"victim LS", adj.VictimLogicalAfter, "12"},
		{"increase %", 100 * (adj.VictimUtilization/adj.UtilizationBefore - 1), "6.67"},
		{"IDR victim U", adj.VictimUtilizationIDR, "0.83"},
		{"IDR increase %", 100 * (adj.VictimUtilizationIDR/adj.UtilizationBefore - 1), "33.3"},
	} {
		if got := fmt.Sprintf("%.*f", decimals(tc.want), tc.got); got != tc.want {
			t.Errorf("%s = %s; paper %s", tc.name, got, tc.want)
		}
	}
	rs, err := RedirectUnit(Figure8Layout(), 3, 0, 60)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rs); got != "[3->core0 as _60 7->core1 as _61 11->core2 as _62]" {
		t.Errorf("redirects %s", got)
	}
	// Every unit redirects N-1 LBAs of the victim, one to each helper.
	for unit := int64(0); unit < 4; unit++ {
		rs, _ := RedirectUnit(Figure8Layout(), 1, unit, 60)
		if len(rs) != 3 {
			t.Fatalf("unit %d: %v", unit, rs)
		}
		seen := map[int]bool{}
		for _, r := range rs {
			if r.LBA%4 != 1 || r.ToCore == 1 || seen[r.ToCore] {
				t.Fatalf("unit %d: bad redirect %v", unit, r)
			}
			seen[r.ToCore] = true
		}
	}
}

func decimals(s string) int {
	for i, c := range s {
		if c == '.' {
			return len(s) - i - 1
		}
	}
	return 0
}

// TestReparoRAIDRatios reproduces section 3: P2 grows 64 times and P_rf 52
// times from sixteen 512 GB SSDs to UL-RAID(16) of 32 TB SSDs, UBER 1e-16.
func TestReparoRAIDRatios(t *testing.T) {
	rows, err := RAIDRisks(PaperRAIDParams())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%.0f", rows[1].P2/rows[0].P2); got != "64" {
		t.Errorf("P2 ratio %s; paper 64", got)
	}
	if got := fmt.Sprintf("%.0f", rows[1].PReadFailure/rows[0].PReadFailure); got != "52" {
		t.Errorf("P_rf ratio %s; paper 52", got)
	}
}

// TestReparoMonteCarlo cross-checks the binomial, eq. 1 (through its exact
// exponential form) and eq. 2 against seeded simulations.
func TestReparoMonteCarlo(t *testing.T) {
	seed := int64(11)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	const trials = 50000
	check := func(name string, count int, p float64) {
		t.Helper()
		sd := math.Sqrt(trials * p * (1 - p))
		if math.Abs(float64(count)-trials*p) > 5*sd+3 {
			t.Errorf("%s: simulated %d of %d, model %.1f", name, count, trials, trials*p)
		}
	}
	// Die failures among 64 dies, p = 0.01.
	atLeast1, atLeast2 := 0, 0
	for i := 0; i < trials; i++ {
		failed := 0
		for d := 0; d < 64; d++ {
			if rng.Float64() < 0.01 {
				failed++
			}
		}
		if failed >= 1 {
			atLeast1++
		}
		if failed >= 2 {
			atLeast2++
		}
	}
	p1, _ := ProbAtLeastFailures(64, 1, 0.01)
	p2, _ := ProbAtLeastFailures(64, 2, 0.01)
	check(">= 1 of 64 dies", atLeast1, p1)
	check(">= 2 of 64 dies", atLeast2, p2)

	// Second failure among n-1 = 15 exponential lifetimes during a repair.
	const mttr, mttf, n = 100.0, 10000.0, 16
	double := 0
	for i := 0; i < trials; i++ {
		for s := 0; s < n-1; s++ {
			if rng.ExpFloat64()*mttf < mttr {
				double++
				break
			}
		}
	}
	pe, _ := DoubleFailureProbabilityExponential(mttr, mttf, n)
	check("double failure", double, pe)
	if p, _ := DoubleFailureProbability(mttr, mttf, n); !(p >= pe && p-pe < p*p) {
		t.Errorf("eq. 1 %g is not the first-order bound of %g", p, pe)
	}

	// Rebuild read of 2000 bits at UBER 1e-4.
	readFail := 0
	for i := 0; i < trials; i++ {
		for b := 0; b < 2000; b++ {
			if rng.Float64() < 1e-4 {
				readFail++
				break
			}
		}
	}
	prf, _ := ReadFailureProbability(1e-4, 2000)
	check("read failure", readFail, prf)
}

func TestReparoValidation(t *testing.T) {
	for name, err := range map[string]error{
		"binomial n":   second(ProbAtLeastFailures(0, 1, 0.1)),
		"binomial p":   second(ProbAtLeastFailures(4, 1, 1.1)),
		"P2 n":         second(DoubleFailureProbability(1, 1, 1)),
		"P2 mttf":      second(DoubleFailureProbability(1, 0, 4)),
		"P2 mttr":      second(DoubleFailureProbabilityExponential(math.NaN(), 1, 4)),
		"P_rf uber":    second(ReadFailureProbability(-1, 10)),
		"P_rf bits":    second(ReadFailureProbability(0.1, math.Inf(1))),
		"IDR":          second(IDRUtilizationIncrease(1)),
		"CDR":          second(CDRUtilizationIncrease(1, 1)),
		"alpha":        second(CDRAlpha(-1, 16)),
		"layout cores": second(SpaceLayout{Cores: 1, DiesPerCore: 4, LogicalSpace: 1, DieCapacity: 1}.Adjust()),
		"layout fit":   second(SpaceLayout{Cores: 4, DiesPerCore: 4, LogicalSpace: 91, DieCapacity: 6}.Adjust()),
		"redirect":     second(RedirectUnit(Figure8Layout(), 4, 0, 60)),
		"raid rate":    second(RAIDRisks(RAIDParams{SSDs: 4, CapacitiesBytes: []int64{1}, MTTFHours: 1})),
	} {
		if !base.IsInvalidArgument(err) {
			t.Errorf("%s: err = %v; want invalid argument", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
