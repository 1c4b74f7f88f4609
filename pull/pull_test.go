package pull_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/pull"
)

func setup(t *testing.T) (*enginetest.Harness, *pull.Manager) {
	t.Helper()
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	h := enginetest.New(t, &engine.Config{Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}})
	m, err := pull.New(context.Background(), pull.Options{Engine: h.Engine, Clock: h.Clock})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return h, m
}

func lost(t *testing.T, err error, end pull.End) {
	t.Helper()
	var le *pull.LostError
	require.ErrorAs(t, err, &le)
	require.Equal(t, end, le.End, le.Reason)
}

// leaseOne submits a task to the pull lane "jobs" and leases it to w1 for
// leaseFor.
func leaseOne(t *testing.T, h *enginetest.Harness, m *pull.Manager, leaseFor time.Duration) (string, pull.Lease) {
	t.Helper()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID
	ls, err := m.Lease(context.Background(), "jobs", 1, leaseFor, 0, "w1")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, id, ls[0].TaskID)
	return id, ls[0]
}

// waitState waits for the goroutine that ends an expired or cancelled
// lease to have finished the attempt.
func waitState(t *testing.T, h *enginetest.Harness, id string, want engine.State) {
	t.Helper()
	waitfor.Eventually(t, "task "+id+" is "+want.String(), func() bool { return h.State(id) == want })
}

func TestALeaseRunsOutOnTheEnginesClockAndSaysSo(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id, ls := leaseOne(t, h, m, 10*time.Second)
	require.Equal(t, h.Clock.Now().Add(10*time.Second), ls.ExpiresAt)
	l, ok := m.Of(id)
	require.True(t, ok)
	require.Empty(t, l.ID, "a task's lease shows no id")
	require.Equal(t, "w1", l.Worker)

	h.Clock.Advance(10 * time.Second)
	waitState(t, h, id, engine.StateRetryWait)
	got := h.Get(id)
	require.Contains(t, got.Attempts[0].Error, "lease expired: w1 did not complete or renew it")
	_, err := m.Renew(ctx, ls.ID, time.Minute)
	lost(t, err, pull.EndExpired)
	_, err = m.Complete(ctx, ls.ID, []byte(`1`))
	lost(t, err, pull.EndExpired)
	_, ok = m.Of(id)
	require.False(t, ok)
}

func TestAWorkerLearnsOfACancelOnItsNextCallAndItsResultIsNotTaken(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id, ls := leaseOne(t, h, m, 5*time.Second)
	_, err := h.Cancel(ctx, id, "not needed")
	require.NoError(t, err)
	_, err = m.Lookup(context.Background(), ls.ID) // the cancel is on the run at once: no waiting
	lost(t, err, pull.EndCancelled)
	require.Contains(t, err.Error(), "not needed")
	_, err = m.Complete(ctx, ls.ID, []byte(`1`))
	lost(t, err, pull.EndCancelled)
	require.Equal(t, engine.StateCancelled, h.State(id))
}

func TestBadArgumentsAreTypedAndLeaseNothing(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID
	for _, c := range []struct {
		max          int
		leaseFor, wt time.Duration
		field        string
	}{
		{0, time.Minute, 0, "max"}, {101, time.Minute, 0, "max"},
		{1, 999 * time.Millisecond, 0, "leaseForMs"}, {1, 25 * time.Hour, 0, "leaseForMs"},
		{1, time.Minute, -time.Second, "waitMs"}, {1, time.Minute, 61 * time.Second, "waitMs"},
	} {
		_, err := m.Lease(ctx, "jobs", c.max, c.leaseFor, c.wt, "w")
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), "%+v", c)
		require.Equal(t, engine.CodeInvalidInput, ee.Code)
		require.Equal(t, c.field, ee.Field)
	}
	require.Equal(t, engine.StateQueued, h.State(id))
	_, err := m.Complete(ctx, "garbage", nil)
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "leaseId", ee.Field)
}

func TestClosingAnswersAWaitingCallAtOnce(t *testing.T) {
	t.Parallel()
	_, m := setup(t)
	done := make(chan error, 1)
	go func() {
		ls, err := m.Lease(context.Background(), "jobs", 1, time.Minute, time.Minute, "w")
		if err == nil && len(ls) != 0 {
			err = errors.New("leased something from an empty lane")
		}
		done <- err
	}()
	m.Close()
	require.NoError(t, <-done)
}

// codes is a retry policy that records the error code of every failed
// attempt it decides on, and fails the task.
type codes struct {
	mu  sync.Mutex
	got []string
}

func (c *codes) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionFail}
}

func (c *codes) DecideDetailed(ctx policy.RetryContext, _ policy.Failure) policy.Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	code := "<no details>"
	if ctx.Details != nil {
		code = ctx.Details.ErrorCode(0)
	}
	c.got = append(c.got, code)
	return policy.Decision{Action: policy.ActionFail}
}

func (c *codes) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// A worker's failTask code is the attempt's error code, as a retry policy
// reads it; a failure without one has none, and a malformed code is refused
// without ending the lease.
func TestAWorkersErrorCodeReachesTheRetryPolicy(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	rec := &codes{}
	require.NoError(t, h.SetRetry("jobs", "codes", rec))
	ctx := context.Background()
	a := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID
	b := h.Submit(enginetest.Spec("b").Lane("jobs").Action("job").Obj()).ID
	ls, err := m.Lease(ctx, "jobs", 2, time.Minute, 0, "w1")
	require.NoError(t, err)
	require.Len(t, ls, 2)
	byTask := map[string]string{ls[0].TaskID: ls[0].ID, ls[1].TaskID: ls[1].ID}

	for _, bad := range []string{"has space", "ünïcode", strings.Repeat("x", pull.MaxCodeLen+1)} {
		_, err = m.Fail(ctx, byTask[a], "boom", bad, true)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee, bad)
		require.Equal(t, "code", ee.Field)
	}
	_, err = m.Lookup(context.Background(), byTask[a])
	require.NoError(t, err, "a refused code leaves the lease held")

	_, err = m.Fail(ctx, byTask[a], "upstream answered 503", "upstream_503", true)
	require.NoError(t, err)
	_, err = m.Fail(ctx, byTask[b], "no code", "", true)
	require.NoError(t, err)
	waitState(t, h, a, engine.StateFailed)
	waitState(t, h, b, engine.StateFailed)
	require.Equal(t, []string{"upstream_503", ""}, rec.seen())
	require.Equal(t, "upstream_503", h.Get(a).Attempts[0].Code, "the attempt keeps the code the policy decided on")
	require.Empty(t, h.Get(b).Attempts[0].Code)
}

// An expired lease's attempt has the code lease_expired, not timeout: a
// retry policy can tell a worker that vanished from a task that ran long.
func TestAnExpiredLeaseReachesTheRetryPolicyAsLeaseExpired(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	rec := &codes{}
	require.NoError(t, h.SetRetry("jobs", "codes", rec))
	id, _ := leaseOne(t, h, m, 10*time.Second)
	h.Clock.Advance(10 * time.Second)
	waitState(t, h, id, engine.StateFailed)
	require.Equal(t, []string{engine.CodeLeaseExpired}, rec.seen())
	require.Equal(t, "lease expired: w1 did not complete or renew it", h.Get(id).Attempts[0].Error,
		"the attempt says the lease expired, not that it timed out")
	require.Equal(t, engine.CodeLeaseExpired, h.Get(id).Attempts[0].Code)
}

// retryAll is a retry policy that retries every failure at once and counts
// its calls.
type retryAll struct {
	mu    sync.Mutex
	calls int
}

func (r *retryAll) Decide(policy.Failure) policy.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	return policy.Decision{Action: policy.ActionRetry}
}

// failTask(retryable: false) fails the task at once: the lane's retry
// policy, which would retry it, is not asked, and the reason says the
// worker failed it.
func TestANonRetryableFailureFailsAtOnceWithoutTheRetryPolicy(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	rec := &retryAll{}
	require.NoError(t, h.SetRetry("jobs", "always", rec))
	a, ls := leaseOne(t, h, m, time.Minute)
	_, err := m.Fail(context.Background(), ls.ID, "the page does not exist", "not_found", false)
	require.NoError(t, err)
	waitState(t, h, a, engine.StateFailed)
	got := h.Get(a)
	require.Equal(t, "failed by its worker (not retryable): the page does not exist", got.Reason)
	require.Equal(t, "not_found", got.Attempts[0].Code)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Zero(t, rec.calls, "the retry policy is not asked")
}

// invalidRetry answers no valid decision, so the built-in decides instead.
type invalidRetry struct{}

func (invalidRetry) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.Action(250)}
}

// A retry reason names the policy that decided, as a fail or a park does:
// the lane's, or the built-in standing in for an invalid answer.
func TestARetryReasonNamesThePolicyThatDecided(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    policy.Retry
		want string
	}{
		{&retryAll{}, "retrying by retry policy always: boom"},
		{invalidRetry{}, "retry in 1s by retry policy exponential (in place of always, whose answer was not valid): boom"},
	} {
		h, m := setup(t)
		require.NoError(t, h.SetRetry("jobs", "always", tc.p))
		a, ls := leaseOne(t, h, m, time.Minute)
		_, err := m.Fail(context.Background(), ls.ID, "boom", "", true)
		require.NoError(t, err)
		waitfor.Eventually(t, "the retry decision", func() bool { return h.Get(a).Attempts[0].EndedAt != time.Time{} })
		require.Equal(t, tc.want, h.Get(a).Reason)
	}
}

// holdUntil is a fairness policy that holds until the engine's time reaches
// until, with the rest as its hint, and then picks the first head.
type holdUntil struct {
	mu    sync.Mutex
	until int64 // ms
	calls int
}

func (p *holdUntil) Pick(ctx policy.PickContext, _ []policy.Candidate, picks []uint32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if ctx.NowMs < p.until {
		return policy.Hold(p.until - ctx.NowMs)
	}
	picks[0] = 0
	return 1
}

func (p *holdUntil) MayHold() bool { return true }

// A lease call waiting for work on a lane whose fairness policy holds asks
// the policy again when its hint elapses, though nothing else happened.
func TestAWaitingLeaseAsksAHoldingPolicyAgainWhenItsHintElapses(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	reaskAt := h.Clock.Now().Add(500 * time.Millisecond)
	p := &holdUntil{until: reaskAt.UnixMilli()}
	require.NoError(t, h.SetFairness("ratecap", p))
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID

	type answer struct {
		ls  []pull.Lease
		err error
	}
	got := make(chan answer, 1)
	go func() {
		// The wait bounds a broken re-ask only: the lease must come at the
		// hint, long before.
		ls, err := m.Lease(ctx, "jobs", 1, time.Minute, 20*time.Second, "w1")
		got <- answer{ls, err}
	}()
	waitfor.Eventually(t, "the waiting lease to look again at the hint", func() bool {
		due, ok := h.Clock.NextDue()
		return ok && due.Equal(reaskAt)
	})
	hold, held := h.PullHold("jobs")
	require.True(t, held)
	require.Equal(t, reaskAt, hold.ReaskAt)
	select {
	case a := <-got:
		t.Fatalf("the lease answered before the hint: %+v", a)
	default:
	}
	h.Clock.Advance(500 * time.Millisecond)
	a := <-got
	require.NoError(t, a.err)
	require.Len(t, a.ls, 1, "asked again at the hint, the policy leases")
	require.Equal(t, id, a.ls[0].TaskID)
}
