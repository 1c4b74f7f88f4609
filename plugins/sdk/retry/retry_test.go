//go:build !wasip1

package retry

import (
	"testing"

	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// echo retries after the failure's previous delay plus its attempt.
type echo struct{}

func (echo) Decide(f policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionRetry, DelayMs: f.PrevDelayMs + int64(f.Attempt)}
}

// The export's straight path (the record read in place) and its general
// path decide alike.
func TestTheStraightPathDecidesAsTheGeneralOne(t *testing.T) {
	if registered == nil { // once: -count runs the test again in the same process
		Register(echo{})
	}
	f := policy.Failure{PrevDelayMs: 100, Attempt: 3, Class: policy.ClassTransient}
	a := guest.Arena
	abi.PutHeader(a, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.FailureSize, Count: 1})
	abi.PutFailure(a[abi.HeaderSize:], &f)
	want := abi.PackDecision(policy.Decision{Action: policy.ActionRetry, DelayMs: 103})
	if got := decide(); got != want {
		t.Errorf("straight path: got %d, want %d", got, want)
	}
	if got := decideAny(); got != want {
		t.Errorf("general path: got %d, want %d", got, want)
	}
	abi.PutHeader(a, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.FailureSize, Count: 2})
	if got := decide(); got != abi.ErrGuest || guest.LastReason == "" {
		t.Errorf("two records: got %d and reason %q, want a refusal", got, guest.LastReason)
	}
}
