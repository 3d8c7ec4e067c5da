package experiments

import (
	"runtime"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/bench"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// topFlat names the largest self-time entries of a go tool pprof -top table.
func TestTopFlat(t *testing.T) {
	top := `Duration: 4.43s, Total samples = 1.77s (39.93%)
Showing nodes accounting for 1.62s, 91.53% of 1.77s total
      flat  flat%   sum%        cum   cum%
     1.34s 75.71% 75.71%      1.34s 75.71%  internal/runtime/syscall/linux.Syscall6
     0.02s  1.13% 76.84%      0.02s  1.13%  runtime.asyncPreempt
     0.01s  0.56% 77.40%      1.27s 71.75%  github.com/flashmend/flashmend/internal/objstore.(*ChunkStore).writeChunk
`
	if got, want := topFlat(top, 2), "internal/runtime/syscall/linux.Syscall6 75.71%, runtime.asyncPreempt 1.13%"; got != want {
		t.Fatalf("topFlat = %q, want %q", got, want)
	}
	if got := topFlat("(no profile: busy)", 3); got != "none (no profile)" {
		t.Fatalf("topFlat without a table = %q", got)
	}
}

// The analysis tells a target above the CPU ceiling (cost-bound) from one
// below it (bound by the CPU the process got), and says nothing of a case
// that meets its target.
func TestDatapathAnalysis(t *testing.T) {
	rep := objectpb.Redundancy_REP
	pl := datapathPlan{Cases: []datapathCase{
		{Op: bench.OpGet, Red: rep, Concurrency: 1, TargetBytesPerS: 1e9},
		{Op: bench.OpPut, Red: rep, Concurrency: 1},
		{Op: bench.OpGet, Red: rep, Concurrency: 4, TargetBytesPerS: 1e6},
	}}
	run := func(bytesPerS, cpuPerGB, limit float64) []datapathRun {
		return []datapathRun{{Result: bench.Result{ThroughputBytesPerS: bytesPerS}, CPUSecondsPerGB: cpuPerGB, LimitBytesPerS: limit}}
	}
	cpus := float64(runtime.NumCPU())
	got := datapathAnalysis(pl, [][]datapathRun{
		run(200e6, 4*cpus, 1e9), // ceiling 250 MB/s < 1 GB/s
		run(20e6, 0.5, 40e6),    // ceiling far above half of 200 MB/s
		run(300e6, 4, 1e9),      // meets its 1 MB/s
	})
	for _, want := range []string{"`get rep x1` (200 MB/s): its cost", "4.0x fewer CPU-seconds", "`put rep x1` (20 MB/s): at 0.50 CPU-s/GB", "50% of the single-threaded file write"} {
		if !strings.Contains(got, want) {
			t.Errorf("analysis lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "x4") {
		t.Errorf("a case that met its target is in the analysis:\n%s", got)
	}
}
