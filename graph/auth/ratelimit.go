// Rate limits for mutations: one token bucket per identity. Each mutation
// field of an operation takes one token; a bucket refills at Rate tokens per
// second up to Burst. An operation that finds too few tokens is refused as a
// whole (RATE_LIMITED, with the wait after which it would pass).

package auth

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// RateLimiter keeps the buckets. The zero value is not usable; a nil
// *RateLimiter allows everything.
type RateLimiter struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter of rate mutations per second per
// identity, with bursts of up to burst (at least 1). A rate ≤ 0 returns nil:
// no limit. now is the clock (nil: time.Now).
func NewRateLimiter(rate float64, burst int, now func() time.Time) *RateLimiter {
	if rate <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{rate: rate, burst: float64(max(burst, 1)), now: now, buckets: map[string]*bucket{}}
}

// Burst returns the largest number of mutations one operation may carry.
func (l *RateLimiter) Burst() int {
	if l == nil {
		return math.MaxInt
	}
	return int(l.burst)
}

// RateHolder names whose rate a refusal speaks of: the token named name,
// or, without tokens, every caller (Anonymous: one rate for all).
func RateHolder(name string) string {
	if name == Anonymous().Name {
		return "the server's anonymous callers (authentication is off: one rate for all)"
	}
	return fmt.Sprintf("token %q", name)
}

// Take takes n tokens from key's bucket. When there are too few, it takes
// none and returns how long until there will be enough.
//
// Keys are identity names: the configured tokens', or Anonymous's (one
// bucket for every caller when authentication is off), so the buckets are
// bounded by the configuration.
func (l *RateLimiter) Take(key string, n int) (ok bool, retryAfter time.Duration) {
	if l == nil || n <= 0 {
		return true, 0
	}
	need := float64(n)
	if need > l.burst {
		return false, -1 // never: the caller reports a LIMIT
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(l.burst, b.tokens+el.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens >= need {
		b.tokens -= need
		return true, 0
	}
	wait := (need - b.tokens) / l.rate
	return false, time.Duration(math.Ceil(wait * float64(time.Second)))
}
