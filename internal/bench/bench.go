package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// Operations.
const (
	OpGet   = "get"
	OpPut   = "put"
	OpMixed = "mixed" // GetFraction of the operations are GETs
)

// Options configures a run. Zero values take the defaults noted.
type Options struct {
	Op          string
	SizeBytes   int           // object size (default 8 MiB)
	Concurrency int           // workers (default 1)
	Duration    time.Duration // default 10s
	// Objects is how many objects GETs read (put before the clock starts;
	// default max(Concurrency, 4)).
	Objects    int
	Redundancy objectpb.Redundancy // default REP
	// GetFraction is the share of GETs in a mixed run (default 0.5).
	GetFraction float64
	// Prefix of the keys the run writes (default "bench/<seed>/").
	Prefix string
	Seed   int64
	// Keep leaves the objects in the cluster.
	Keep bool
	// Started, when set, is called once the objects GETs read are in
	// place, right before the workers start (a profiler starts there, so
	// that it leaves out the preparation).
	Started func()
}

// Result is what a run measured. JSON field names carry their units.
type Result struct {
	// Store is "object" (Run) or "kv" (RunKV).
	Store               string  `json:"store"`
	Op                  string  `json:"op"`
	Redundancy          string  `json:"redundancy"`
	SizeBytes           int     `json:"size_bytes"`
	Concurrency         int     `json:"concurrency"`
	DurationS           float64 `json:"duration_s"`
	Ops                 int     `json:"ops"`
	Gets                int     `json:"gets"`
	Puts                int     `json:"puts"`
	Errors              int     `json:"errors"`
	Bytes               int64   `json:"bytes"`
	ThroughputBytesPerS float64 `json:"throughput_bytes_per_s"`
	OpsPerS             float64 `json:"ops_per_s"`
	LatencyMsP50        float64 `json:"latency_ms_p50"`
	LatencyMsP90        float64 `json:"latency_ms_p90"`
	LatencyMsP99        float64 `json:"latency_ms_p99"`
	LatencyMsMax        float64 `json:"latency_ms_max"`
	// CPUs is runtime.NumCPU of the machine the client ran on (shared
	// with the cluster when it runs locally).
	CPUs int `json:"cpus"`
	// FirstError is the first failed operation's error, "" when none.
	FirstError string `json:"first_error,omitempty"`
}

func (r Result) String() string {
	if r.Store == "kv" {
		s := fmt.Sprintf("kv %s of %d B values x%d for %.1fs: %d ops (%d errors), %.1f ops/s, %s/s of values, latency ms p50 %.2f p90 %.2f p99 %.2f max %.2f (%d CPUs)",
			r.Op, r.SizeBytes, r.Concurrency, r.DurationS, r.Ops, r.Errors, r.OpsPerS, base.Bytes(int64(r.ThroughputBytesPerS)),
			r.LatencyMsP50, r.LatencyMsP90, r.LatencyMsP99, r.LatencyMsMax, r.CPUs)
		if r.FirstError != "" {
			s += "; first error: " + r.FirstError
		}
		return s
	}
	s := fmt.Sprintf("%s %s %s x%d for %.1fs: %d ops (%d errors), %s/s, %.1f ops/s, latency ms p50 %.2f p90 %.2f p99 %.2f max %.2f (%d CPUs)",
		r.Op, r.Redundancy, base.Bytes(r.SizeBytes), r.Concurrency, r.DurationS, r.Ops, r.Errors,
		base.Bytes(int64(r.ThroughputBytesPerS)), r.OpsPerS, r.LatencyMsP50, r.LatencyMsP90, r.LatencyMsP99, r.LatencyMsMax, r.CPUs)
	if r.FirstError != "" {
		s += "; first error: " + r.FirstError
	}
	return s
}

func (o *Options) defaults() error {
	switch o.Op {
	case OpGet, OpPut, OpMixed:
	default:
		return base.InvalidArgumentf("bench: operation %q (want get, put or mixed)", o.Op)
	}
	if o.SizeBytes == 0 {
		o.SizeBytes = 8 << 20
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Objects == 0 {
		o.Objects = max(o.Concurrency, 4)
	}
	if o.GetFraction == 0 {
		o.GetFraction = 0.5
	}
	if o.Redundancy == objectpb.Redundancy_REDUNDANCY_UNSPECIFIED {
		o.Redundancy = objectpb.Redundancy_REP
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("bench/%d/", o.Seed)
	}
	switch {
	case o.SizeBytes < 0:
		return base.InvalidArgumentf("bench: negative size %d", o.SizeBytes)
	case o.Concurrency < 1 || o.Concurrency > 4096:
		return base.InvalidArgumentf("bench: concurrency %d outside [1, 4096]", o.Concurrency)
	case o.Duration < 0:
		return base.InvalidArgumentf("bench: negative duration %s", o.Duration)
	case o.Objects < 1:
		return base.InvalidArgumentf("bench: %d objects", o.Objects)
	case !(o.GetFraction > 0 && o.GetFraction <= 1):
		return base.InvalidArgumentf("bench: GET fraction %g outside (0, 1]", o.GetFraction)
	}
	return nil
}

// sample is one finished operation.
type sample struct {
	get     bool
	latency time.Duration
	err     error
}

// Run puts the objects GETs read, runs the workers for the duration and
// returns the figures. A GET that returns wrong bytes fails the run.
func Run(ctx context.Context, c *client.Client, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	rng := rand.New(rand.NewSource(o.Seed))
	contents := make([]*Pattern, o.Objects)
	keys := make([]string, o.Objects)
	for i := range contents {
		contents[i] = NewPattern(rng, int64(o.SizeBytes))
		keys[i] = fmt.Sprintf("%sobj-%05d", o.Prefix, i)
	}
	written := map[string]bool{}
	var writtenMu sync.Mutex
	defer func() {
		if o.Keep {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for k := range written {
			_ = c.Delete(dctx, k) // best effort: a left-over object is only garbage
		}
	}()
	if o.Op != OpPut {
		for i, k := range keys {
			if _, err := c.PutReader(ctx, k, contents[i].Reader(), contents[i].Size, o.Redundancy); err != nil {
				return Result{}, fmt.Errorf("bench: preparing %s: %w", k, err)
			}
			written[k] = true
		}
	}
	var mu sync.Mutex
	var samples []sample
	var wrong error
	if o.Started != nil {
		o.Started()
	}
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			wrng := rand.New(rand.NewSource(o.Seed + int64(w) + 1))
			for n := 0; ctx.Err() == nil && time.Now().Before(deadline); n++ {
				get := o.Op == OpGet || (o.Op == OpMixed && wrng.Float64() < o.GetFraction)
				i := wrng.Intn(o.Objects)
				key, data := keys[i], contents[i]
				if !get && o.Op == OpPut {
					// Each worker overwrites its own keys: no two
					// workers race on a version.
					key = fmt.Sprintf("%sput-%03d-%03d", o.Prefix, w, n%8)
				}
				t0 := time.Now()
				var err error
				if get {
					check := data.Checker()
					_, _, err = c.GetTo(ctx, key, client.ModeDefault, check)
					bad := check.Mismatch()
					if err == nil {
						bad = check.Complete()
					}
					if bad != nil {
						mu.Lock()
						wrong = fmt.Errorf("bench: GET %s: %w", key, bad)
						mu.Unlock()
						return
					}
				} else {
					_, err = c.PutReader(ctx, key, data.Reader(), data.Size, o.Redundancy)
					if err == nil && o.Op == OpPut {
						writtenMu.Lock()
						written[key] = true
						writtenMu.Unlock()
					}
				}
				s := sample{get: get, latency: time.Since(t0), err: err}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if wrong != nil {
		return Result{}, wrong
	}
	r := Summarize(samples, elapsed, o.SizeBytes)
	r.Store, r.Op, r.Redundancy, r.SizeBytes, r.Concurrency = "object", o.Op, redundancyName(o.Redundancy), o.SizeBytes, o.Concurrency
	r.CPUs = runtime.NumCPU()
	return r, ctx.Err()
}

func redundancyName(r objectpb.Redundancy) string {
	if r == objectpb.Redundancy_EC {
		return "ec"
	}
	return "rep"
}

// Summarize computes a run's figures from its samples: throughput and
// operations per second over the elapsed time, latency percentiles by
// nearest rank over the operations that succeeded.
func Summarize(samples []sample, elapsed time.Duration, size int) Result {
	var r Result
	r.DurationS = elapsed.Seconds()
	var lat []time.Duration
	for _, s := range samples {
		if s.err != nil {
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = s.err.Error()
			}
			continue
		}
		r.Ops++
		if s.get {
			r.Gets++
		} else {
			r.Puts++
		}
		r.Bytes += int64(size)
		lat = append(lat, s.latency)
	}
	if r.DurationS > 0 {
		r.ThroughputBytesPerS = float64(r.Bytes) / r.DurationS
		r.OpsPerS = float64(r.Ops) / r.DurationS
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.LatencyMsP50, r.LatencyMsP90, r.LatencyMsP99 = ms(percentile(lat, 50)), ms(percentile(lat, 90)), ms(percentile(lat, 99))
	if len(lat) > 0 {
		r.LatencyMsMax = ms(lat[len(lat)-1])
	}
	return r
}

// percentile is the nearest-rank percentile p of sorted (0 when empty).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
