package direct

import (
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestScrubREPRepairsEveryCorruptReplica(t *testing.T) {
	id := ChunkID{Object: 1, Version: 1}
	data := make([]byte, ChunkSize)
	rand.New(rand.NewSource(4)).Read(data)
	for _, tc := range []struct {
		states  []replicaState
		repairs []int
	}{
		{[]replicaState{stGood, stGood, stGood}, nil},
		{[]replicaState{stGood, stFlipA, stSumsBad}, []int{1, 2}},
		{[]replicaState{stFlipB, stGood, stFlipA}, []int{0, 2}},
		{[]replicaState{stFlipA, stFlipB, stSumsBad}, []int{0, 1, 2}},
		{[]replicaState{stUnavailable, stGood, stFlipA}, []int{2}},
	} {
		reads := make([]ReplicaRead, 3)
		for i, s := range tc.states {
			reads[i] = makeRead(s, id, data)
		}
		d := ScrubREP(id, len(data), reads)
		if d.Err != nil || !slices.Equal(d.Repairs, tc.repairs) {
			t.Fatalf("%v: %s %v", tc.states, d, d.Err)
		}
	}
}

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(100, 0)
	b, err := NewTokenBucket(1000, 500, t0)
	if err != nil {
		t.Fatal(err)
	}
	if w := b.Reserve(500, t0); w != 0 {
		t.Fatalf("burst: wait %v", w)
	}
	if w := b.Reserve(1000, t0); w != time.Second {
		t.Fatalf("debt: wait %v", w)
	}
	// After the wait the debt is paid; half a second later 500 B are back.
	if w := b.Reserve(500, t0.Add(1500*time.Millisecond)); w != 0 {
		t.Fatalf("refill: wait %v (%s)", w, b)
	}
	// Over a long run the rate holds: 100 requests of 100 B at 1000 B/s
	// take 10 s, whatever the burst.
	now := t0.Add(10 * time.Second)
	b, _ = NewTokenBucket(1000, 100, now)
	start := now
	for i := 0; i < 100; i++ {
		now = now.Add(b.Reserve(100, now))
	}
	if got := now.Sub(start); got < 9*time.Second || got > 10*time.Second {
		t.Fatalf("100x100B at 1000B/s took %v", got)
	}
	if _, err := NewTokenBucket(0, 1, t0); err == nil {
		t.Fatal("zero rate accepted")
	}
}
