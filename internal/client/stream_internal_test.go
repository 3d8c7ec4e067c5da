package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// TestPipeline runs the read-ahead pipeline over seeded random shapes with
// fetchers that finish out of order, and checks what it promises: every
// unit delivered once, in order; never more than `ahead` units fetched and
// not yet delivered; never more than `inFlight` fetches at once; the first
// error in unit order is the one returned and nothing after it is
// delivered.
func TestPipeline(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	for trial := 0; trial < 200; trial++ {
		n, ahead, inFlight := rng.Intn(40), 1+rng.Intn(8), 1+rng.Intn(8)
		failAt := -1
		if rng.Intn(3) == 0 && n > 0 {
			failAt = rng.Intn(n)
		}
		yields := make([]int, n)
		for i := range yields {
			yields[i] = rng.Intn(20)
		}
		name := fmt.Sprintf("trial %d n=%d ahead=%d inFlight=%d failAt=%d", trial, n, ahead, inFlight, failAt)
		var mu sync.Mutex
		started, delivered := 0, 0
		var running, maxRunning atomic.Int32
		errFail := errors.New("injected")
		err := pipeline(context.Background(), n, ahead, inFlight, func(ctx context.Context, i int) (int, error) {
			mu.Lock()
			started++
			if held := started - delivered; held > max(1, min(ahead, n)) {
				mu.Unlock()
				return 0, fmt.Errorf("%d units started and not delivered (ahead %d)", held, ahead)
			}
			mu.Unlock()
			r := running.Add(1)
			for {
				m := maxRunning.Load()
				if r <= m || maxRunning.CompareAndSwap(m, r) {
					break
				}
			}
			for k := 0; k < yields[i]; k++ {
				runtime.Gosched() // let later units finish first
			}
			running.Add(-1)
			if i == failAt {
				return 0, errFail
			}
			return i * 7, nil
		}, func(i int, v int) error {
			mu.Lock()
			defer mu.Unlock()
			if i != delivered || v != i*7 {
				return fmt.Errorf("delivered unit %d value %d, want unit %d", i, v, delivered)
			}
			delivered++
			return nil
		})
		switch {
		case failAt >= 0 && !errors.Is(err, errFail):
			t.Fatalf("%s: err %v, want the injected failure", name, err)
		case failAt >= 0 && delivered != failAt:
			t.Fatalf("%s: delivered %d units, want the %d before the failure", name, delivered, failAt)
		case failAt < 0 && err != nil:
			t.Fatalf("%s: %v", name, err)
		case failAt < 0 && delivered != n:
			t.Fatalf("%s: delivered %d of %d", name, delivered, n)
		}
		if m := maxRunning.Load(); int(m) > inFlight {
			t.Fatalf("%s: %d fetches ran at once", name, m)
		}
	}
}

// TestPipelineStopsOnDeliverError: a failing consumer (a closed pipe, a
// full disk) stops the fetches; the pipeline returns its error.
func TestPipelineStopsOnDeliverError(t *testing.T) {
	errStop := errors.New("consumer gone")
	var fetched atomic.Int32
	err := pipeline(context.Background(), 1000, 4, 2, func(ctx context.Context, i int) (int, error) {
		fetched.Add(1)
		return i, nil
	}, func(i int, v int) error {
		if i == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("err %v", err)
	}
	if f := fetched.Load(); f > 4+4 {
		t.Fatalf("%d units fetched after the consumer stopped at unit 3 (window 4)", f)
	}
}
