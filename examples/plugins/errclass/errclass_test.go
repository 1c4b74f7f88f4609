package errclass

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

func failure(status uint16, attempt uint16) policy.Failure {
	return policy.Failure{NowMs: 1e12, TaskSeq: 1, BaseDelayMs: 1000, MaxDelayMs: 30_000, Multiplier: 2000,
		Attempt: attempt, MaxAttempts: 5, HTTPStatus: status, Class: policy.ClassTransient}
}

func retryAfter(ms int64) policy.Decision {
	return policy.Decision{Action: policy.ActionRetry, DelayMs: ms}
}

var (
	fail = policy.Decision{Action: policy.ActionFail}
	park = policy.Decision{Action: policy.ActionPark}
)

func TestEachClassBacksOffAsPromised(t *testing.T) {
	t.Parallel()
	r := &Retry{}
	for _, tc := range []struct {
		name   string
		status uint16
		want   []policy.Decision // after attempts 1, 2, 3, …
	}{
		{"throttled 429", 429, []policy.Decision{retryAfter(4000), retryAfter(8000), retryAfter(16_000), retryAfter(32_000), park}},
		{"unavailable 503", 503, []policy.Decision{retryAfter(4000), retryAfter(8000), retryAfter(16_000), retryAfter(32_000), park}},
		{"server error 500", 500, []policy.Decision{retryAfter(1000), retryAfter(2000), retryAfter(4000), retryAfter(8000), park}},
		{"bad gateway 502", 502, []policy.Decision{retryAfter(1000), retryAfter(2000)}},
		{"gateway timeout 504", 504, []policy.Decision{retryAfter(1000), fail}},
		{"network error, no status", 0, []policy.Decision{retryAfter(1000), fail}},
		{"request timeout 408", 408, []policy.Decision{retryAfter(1000), fail}},
		{"not found 404", 404, []policy.Decision{fail}},
	} {
		for i, want := range tc.want {
			require.Equal(t, want, r.Decide(failure(tc.status, uint16(i+1))), "%s after attempt %d", tc.name, i+1)
		}
	}
}

func TestPermanentAndCancelledFailuresFailAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []policy.ErrorClass{policy.ClassPermanent, policy.ClassCancelled} {
		f := failure(503, 1)
		f.Class = c
		require.Equal(t, fail, (&Retry{}).Decide(f), c.String())
	}
}

func TestThrottledBackoffIsCappedAndStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	r := &Retry{ThrottleFactor: 2}
	f := failure(429, 4) // 2000 × 2^3 = 16000, under the cap of 2 × 30000
	require.Equal(t, retryAfter(16_000), r.Decide(f))
	f.MaxDelayMs = 5000
	require.Equal(t, retryAfter(10_000), r.Decide(f), "capped at 2 × max")
	f.DeadlineMs = f.NowMs + 9000
	require.Equal(t, fail, r.Decide(f), "the retry would start after the deadline")
}

func TestConfigurationIsChecked(t *testing.T) {
	t.Parallel()
	r := &Retry{}
	require.NoError(t, r.Configure([]byte(`{"throttleFactor": 8, "timeoutRetries": 2}`)))
	require.Equal(t, retryAfter(1000), r.Decide(failure(504, 2)), "two timeouts are retried")
	require.Equal(t, retryAfter(8000), r.Decide(failure(429, 1)))
	require.Error(t, r.Configure([]byte(`{"throttleFactor": -1}`)))
	require.Error(t, r.Configure([]byte(`{"timeoutRetries": "once"}`)))
}
