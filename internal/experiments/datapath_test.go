package experiments

import "testing"

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
