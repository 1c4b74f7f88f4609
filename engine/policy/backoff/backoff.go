// Package backoff is the built-in retry policy: transient failures are retried
// with exponential backoff until the attempt budget is spent, then the task is
// parked; permanent failures fail at once. With the defaults (4 attempts, 1 s
// doubling, capped at 60 s) a task runs at most four times, waiting 1 s, 2 s
// and 4 s between attempts.
//
// Jitter is off unless the task's retry policy asks for it; it is then
// "equal jitter" (half the delay fixed, half spread) drawn from a hash of the
// task's sequence number and attempt, so a replay decides the same delays.
package backoff

import "github.com/switchyard/switchyard/engine/policy"

// Name is the policy's registered name.
const Name = "exponential"

// Retry decides by exponential backoff. The zero value is ready to use.
type Retry struct{}

// Decide implements policy.Retry.
func (Retry) Decide(f policy.Failure) policy.Decision {
	if f.Class != policy.ClassTransient {
		return policy.Decision{Action: policy.ActionFail}
	}
	if f.Attempt >= f.MaxAttempts {
		return policy.Decision{Action: policy.ActionPark}
	}
	d := Delay(f.BaseDelayMs, f.MaxDelayMs, f.Multiplier, f.Attempt)
	if f.Flags&policy.FailureJitter != 0 && d > 1 {
		d = d/2 + int64(mix(f.TaskSeq, uint64(f.Attempt))%uint64(d/2+1))
	}
	if f.DeadlineMs != 0 && f.NowMs+d >= f.DeadlineMs {
		return policy.Decision{Action: policy.ActionFail}
	}
	return policy.Decision{Action: policy.ActionRetry, DelayMs: d}
}

// Delay returns the backoff before the retry that follows failed attempt n
// (from 1): base × (multiplier/1000)^(n-1), capped at max.
func Delay(base, max int64, multiplier uint32, n uint16) int64 {
	if base <= 0 {
		return 0
	}
	d := base
	for i := uint16(1); i < n && d < max; i++ {
		d = d * int64(multiplier) / 1000
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// mix is SplitMix64's finaliser over two words: a cheap, well-spread hash.
func mix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 ^ b
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
