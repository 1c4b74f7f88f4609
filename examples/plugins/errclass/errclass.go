// Package errclass is a retry policy that treats failures by what went
// wrong, read from the instance's HTTP status:
//
//   - 429 Too Many Requests and 503 Service Unavailable mean "slow down":
//     exponential backoff from ThrottleFactor × the base delay, capped at
//     ThrottleFactor × the maximum;
//   - a timeout (408, 504, or a transient failure without a status, which
//     is how the executor reports a network error or a deadline) is retried
//     TimeoutRetries times at the base delay, then fails: a page that timed
//     out twice will time out again;
//   - any other transient failure (500, 502, …) backs off exponentially
//     from the base delay, as the built-in policy does;
//   - a permanent or cancelled failure, or another 4xx status, fails at
//     once: running it again cannot help.
//
// When the attempt budget is spent the task is parked, as with the
// built-in policy, and a retry that would start after the task's deadline
// fails instead. Configuration (every field optional):
//
//	{"throttleFactor": 4, "timeoutRetries": 1}
package errclass

import (
	"encoding/json"
	"errors"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
)

// Retry is the policy. The zero value uses the defaults.
type Retry struct {
	ThrottleFactor int64 `json:"throttleFactor"` // default 4
	TimeoutRetries int   `json:"timeoutRetries"` // default 1
}

// Configure implements sdk.Configurable.
func (r *Retry) Configure(doc []byte) error {
	var c Retry
	if err := json.Unmarshal(doc, &c); err != nil {
		return err
	}
	if c.ThrottleFactor < 0 || c.ThrottleFactor > 100 || c.TimeoutRetries < 0 || c.TimeoutRetries > 10 {
		return errors.New("throttleFactor must be in [0, 100] and timeoutRetries in [0, 10]")
	}
	*r = c
	return nil
}

// Class is what a failure's status says about it.
type Class uint8

// Failure classes.
const (
	Fatal     Class = iota // permanent, cancelled, or a 4xx other than 408 and 429
	Throttled              // 429, 503
	Timeout                // 408, 504, or transient without a status
	Server                 // any other transient failure
)

// Classify returns the class of f.
func Classify(f policy.Failure) Class {
	if f.Class != policy.ClassTransient {
		return Fatal
	}
	switch s := f.HTTPStatus; {
	case s == 429 || s == 503:
		return Throttled
	case s == 0 || s == 408 || s == 504:
		return Timeout
	case s >= 400 && s < 500:
		return Fatal
	}
	return Server
}

// Decide implements policy.Retry.
func (r *Retry) Decide(f policy.Failure) policy.Decision {
	factor := r.ThrottleFactor
	if factor == 0 {
		factor = 4
	}
	timeouts := r.TimeoutRetries
	if timeouts == 0 {
		timeouts = 1
	}
	var d int64
	switch Classify(f) {
	case Fatal:
		return policy.Decision{Action: policy.ActionFail}
	case Timeout:
		if int(f.Attempt) > timeouts {
			return policy.Decision{Action: policy.ActionFail}
		}
		d = f.BaseDelayMs
	case Throttled:
		d = backoff.Delay(f.BaseDelayMs*factor, f.MaxDelayMs*factor, f.Multiplier, f.Attempt)
	case Server:
		d = backoff.Delay(f.BaseDelayMs, f.MaxDelayMs, f.Multiplier, f.Attempt)
	}
	if f.Attempt >= f.MaxAttempts {
		return policy.Decision{Action: policy.ActionPark}
	}
	d = min(max(d, 0), policy.MaxRetryDelayMs)
	if f.DeadlineMs != 0 && f.NowMs+d >= f.DeadlineMs {
		return policy.Decision{Action: policy.ActionFail}
	}
	return policy.Decision{Action: policy.ActionRetry, DelayMs: d}
}
