// Package jitter is a retry policy with "decorrelated jitter" backoff: each
// delay is drawn between the base delay and three times the previous one,
// capped, so that many tasks failing together spread their retries out
// instead of retrying in lockstep. The draw is a hash of the task's
// sequence number and attempt, so a replay decides the same delays.
package jitter

import "github.com/switchyard/switchyard/engine/policy"

// Retry decides with decorrelated jitter. The zero value is ready to use.
type Retry struct{}

// Decide implements policy.Retry.
func (Retry) Decide(f policy.Failure) policy.Decision {
	if f.Class != policy.ClassTransient {
		return policy.Decision{Action: policy.ActionFail}
	}
	if f.Attempt >= f.MaxAttempts {
		return policy.Decision{Action: policy.ActionPark}
	}
	base := max(f.BaseDelayMs, 1)
	hi := max(f.PrevDelayMs*3, base)
	d := base + int64(mix(f.TaskSeq, uint64(f.Attempt))%uint64(hi-base+1))
	if f.MaxDelayMs > 0 {
		d = min(d, f.MaxDelayMs)
	}
	d = min(d, policy.MaxRetryDelayMs)
	if f.DeadlineMs != 0 && f.NowMs+d >= f.DeadlineMs {
		return policy.Decision{Action: policy.ActionFail}
	}
	return policy.Decision{Action: policy.ActionRetry, DelayMs: d}
}

func mix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 ^ b
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
