package direct

import (
	"fmt"
	"math"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// ScrubREP is the scrubber's decision for one chunk of a replicated object
// after reading every replica: the DIRECT decision, plus a repair of every
// replica found corrupt, including those after the first good one (a read
// would stop at the first good copy; the scrubber verifies all of them).
func ScrubREP(id ChunkID, wantLen int, reads []ReplicaRead) Decision {
	d := DecideREP(id, wantLen, reads)
	if d.Err != nil || len(d.Fetch) > 0 {
		return d
	}
	for i, r := range reads {
		if judge(id, 0, wantLen, r) != corrupt {
			continue
		}
		already := false
		for _, j := range d.Repairs {
			already = already || i == j
		}
		if !already {
			d.Repairs = append(d.Repairs, i)
			d.RepairData = append(d.RepairData, d.Data)
		}
	}
	return d
}

// TokenBucket is a byte budget refilled at a fixed rate: the scrubber's
// reads and its repairs each go through one, so repair traffic never exceeds
// its budget and a burst of failures queues instead of becoming a storm.
// Time is an input: the bucket never reads a clock.
type TokenBucket struct {
	rate   float64 // bytes per second
	burst  float64 // bytes
	tokens float64
	last   time.Time
}

// NewTokenBucket returns a full bucket of burstBytes refilled at
// rateBytesPerSecond.
func NewTokenBucket(rateBytesPerSecond, burstBytes base.Bytes, now time.Time) (*TokenBucket, error) {
	if rateBytesPerSecond <= 0 || burstBytes <= 0 {
		return nil, base.InvalidArgumentf("token bucket: rate %d B/s and burst %d B must be positive", rateBytesPerSecond, burstBytes)
	}
	return &TokenBucket{rate: float64(rateBytesPerSecond), burst: float64(burstBytes), tokens: float64(burstBytes), last: now}, nil
}

func (b *TokenBucket) String() string {
	return fmt.Sprintf("bucket %.0fB/s burst %.0fB tokens %.0f", b.rate, b.burst, b.tokens)
}

// Reserve takes n bytes from the bucket at time now and returns how long the
// caller must wait before spending them (0 when they are available). The
// bucket may go into debt, so a request larger than the burst still passes
// once, at the configured rate.
func (b *TokenBucket) Reserve(n int64, now time.Time) time.Duration {
	if now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}
