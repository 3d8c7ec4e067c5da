package base

import "sync"

// InFlight remembers which keys have an operation in progress, so that
// callers that meet the same damage at the same time repair it once. The
// zero value is ready to use; it is safe for concurrent use.
type InFlight[K comparable] struct {
	mu   sync.Mutex
	keys map[K]bool
}

// Begin reports whether the caller starts the operation for k: false when
// one is already in progress. A caller that starts it calls End(k) when it
// is done.
func (f *InFlight[K]) Begin(k K) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys[k] {
		return false
	}
	if f.keys == nil {
		f.keys = map[K]bool{}
	}
	f.keys[k] = true
	return true
}

// End marks the operation for k done.
func (f *InFlight[K]) End(k K) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, k)
}
