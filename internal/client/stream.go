package client

import (
	"context"
	"sync"
)

// pipeline runs fetch for units 0..n-1 and hands each result to deliver in
// unit order. At most ahead units are fetched or held past the oldest one
// not yet delivered (the read-ahead window: results wait in their slot for
// their turn), and at most inFlight fetches run at once. deliver runs on
// the calling goroutine, one unit at a time. The first error in unit order
// (of a fetch or of deliver) stops the pipeline and is returned; fetches
// still running see their context cancelled and their results are dropped.
func pipeline[T any](ctx context.Context, n, ahead, inFlight int, fetch func(context.Context, int) (T, error), deliver func(int, T) error) error {
	if n == 0 {
		return nil
	}
	ahead = max(1, min(ahead, n))
	inFlight = max(1, min(inFlight, ahead))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	// NB: unit i uses slot i%ahead; unit i+ahead is dispatched only after
	// unit i was delivered (window tokens), so a slot never holds two
	// results, and its capacity of one never blocks a fetcher, even one
	// that finishes after the pipeline stopped.
	slots := make([]chan result, ahead)
	for k := range slots {
		slots[k] = make(chan result, 1)
	}
	window := make(chan struct{}, ahead)
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		for i := 0; i < n; i++ {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				v, err := fetch(ctx, i)
				<-sem
				slots[i%ahead] <- result{v, err}
			}(i)
		}
	}()
	var err error
	for i := 0; i < n && err == nil; i++ {
		select {
		case r := <-slots[i%ahead]:
			if err = r.err; err == nil {
				err = deliver(i, r.v)
			}
			<-window
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	cancel()
	<-dispatched
	wg.Wait()
	return err
}
