package simulate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/simulate"
	"github.com/switchyard/switchyard/examples/plugins/errcode"
)

func TestWorkloadRoundTripsThroughJSONLines(t *testing.T) {
	t.Parallel()
	subs := simulate.Generate(simulate.Synthetic{Agents: 3, Tasks: 50, Seed: 4})
	var buf bytes.Buffer
	require.NoError(t, simulate.WriteWorkload(&buf, subs))
	back, err := simulate.ReadWorkload(&buf)
	require.NoError(t, err)
	require.Len(t, back, 50)
	for i := range subs {
		require.Equal(t, subs[i].Agent, back[i].Agent)
		require.Equal(t, subs[i].Priority, back[i].Priority)
		require.InDelta(t, float64(subs[i].Duration), float64(back[i].Duration), float64(time.Microsecond))
	}
	_, err = simulate.ReadWorkload(strings.NewReader(`{"atMs":1,"agent":"a","durationMs":5,"colour":"red"}`))
	require.ErrorContains(t, err, "line 1")
}

func TestSimulationIsDeterministicAndFairToAQuietAgent(t *testing.T) {
	t.Parallel()
	// A noisy agent submits 8× more than three quiet ones into a narrow lane.
	subs := simulate.Generate(simulate.Synthetic{Agents: 4, Tasks: 600, Span: 5 * time.Second, Duration: 100 * time.Millisecond, Skew: 8, Seed: 1})
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4}}, AgentMaxInFlight: 4}
	a, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
	require.NoError(t, err)
	b, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
	require.NoError(t, err)
	require.Equal(t, a.Order, b.Order, "same workload, same decisions")
	require.Len(t, a.Order, 600, "every task was dispatched")

	noisy := a.Agents[0]
	require.Equal(t, "agent-0", noisy.Agent)
	for _, q := range a.Agents[1:] {
		require.Less(t, q.WaitP50, noisy.WaitP50, "fair share serves the quiet %s before the noisy neighbour's backlog", q.Agent)
	}

	// FIFO over the same workload (every agent looks alike to it) makes the
	// quiet agents wait behind the noisy one: a lower fairness index.
	fifo, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "fifo", Fairness: oldestHead{}})
	require.NoError(t, err)
	t.Logf("Jain: fair share %.3f, FIFO %.3f", a.Jain, fifo.Jain)
	require.Less(t, fifo.Jain, a.Jain)
	require.Greater(t, a.Jain, 0.9)
}

// A report is the same to the last bit on every run of one workload: its
// fairness sums run in agent order, not in map order. Forty agents of
// different weights make a sum in another order differ in its last digits.
func TestAReportIsTheSameToTheLastBitOnEveryRun(t *testing.T) {
	t.Parallel()
	subs := simulate.Generate(simulate.Synthetic{Agents: 40, Tasks: 2000, Span: 2 * time.Second, Duration: 30 * time.Millisecond, Skew: 5, Seed: 7})
	agents := map[string]engine.AgentConfig{}
	for i := range 40 {
		agents[fmt.Sprintf("agent-%d", i)] = engine.AgentConfig{Weight: 1 + i%7}
	}
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 8}}, AgentMaxInFlight: 4, Agents: agents}
	first, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
	require.NoError(t, err)
	want, err := json.Marshal(first)
	require.NoError(t, err)
	for range 8 {
		rep, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
		require.NoError(t, err)
		got, err := json.Marshal(rep)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}

// oldestHead picks the oldest head, ignoring agents: plain FIFO.
type oldestHead struct{}

func (oldestHead) Pick(_ policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	best := 0
	for i := range cands {
		if cands[i].HeadSeq < cands[best].HeadSeq {
			best = i
		}
	}
	picks[0] = uint32(best)
	return 1
}

// realistic is a workload written from the documented format: two agents
// submitting 400 tasks over 200 ms into every default lane, with sessions,
// priorities, deadlines and failures.
func realistic(t *testing.T) []simulate.Submission {
	t.Helper()
	var b strings.Builder
	lanes := []string{"main", "subagent", "team", "cron"}
	prios := []string{"CRITICAL", "high", "NORMAL", "low"}
	outcomes := []string{"ok", "ok", "transient", "permanent"}
	for i := range 400 {
		fmt.Fprintf(&b, `{"atMs": %.1f, "agent": "%s", "durationMs": %d, "lane": "%s", "session": "s%d", "priority": "%s", "deadlineMs": %d, "outcome": "%s"}`+"\n",
			float64(i)/2, []string{"alice", "bob"}[i%2], 20+i%7*15, lanes[i%4], i%9, prios[i%4], i%3*500, outcomes[i%4])
	}
	subs, err := simulate.ReadWorkload(strings.NewReader(b.String()))
	require.NoError(t, err)
	return subs
}

func TestARealisticWorkloadRunsToTheEnd(t *testing.T) {
	t.Parallel()
	subs := realistic(t)
	cfg := engine.Config{Lanes: engine.DefaultLanes(), AgentMaxInFlight: 4}
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
	require.NoError(t, err)
	require.Equal(t, 400, rep.Tasks)
	dispatched := 0
	for _, a := range rep.Agents {
		dispatched += a.Dispatched
	}
	// Tasks whose deadline passes while they wait are never dispatched.
	require.Greater(t, dispatched, 200)
	require.Positive(t, rep.Makespan)
}

func TestARunThatFailsEndsInsteadOfWaitingForItsTasks(t *testing.T) {
	t.Parallel()
	subs := realistic(t)
	subs[300].Lane = "nowhere"
	// Tasks are in flight on the fake clock when submission 300 is refused:
	// the run must end with the error, not wait for them.
	_, err := simulate.Run(context.Background(), subs, simulate.Options{Config: engine.Config{AgentMaxInFlight: 4}})
	require.ErrorContains(t, err, "submission 300")
	require.ErrorContains(t, err, `unknown lane "nowhere"`)
}

func TestARunPastItsBoundsFailsWithErrLimit(t *testing.T) {
	t.Parallel()
	subs := realistic(t)
	_, err := simulate.Run(context.Background(), subs, simulate.Options{MaxSteps: 50})
	require.ErrorIs(t, err, simulate.ErrLimit)
	require.ErrorContains(t, err, "scheduled calls")
	require.ErrorContains(t, err, "the workload needs more scheduled calls than the bound allows")

	// Tasks that keep failing under a policy that retries them at once:
	// the error says so, rather than only that the bound was reached.
	failing := make([]simulate.Submission, 20)
	for i := range failing {
		failing[i] = simulate.Submission{At: time.Duration(i) * time.Millisecond, Agent: "a", Duration: time.Second, Outcome: "transient"}
	}
	lanes := engine.DefaultLanes()
	for i := range lanes {
		lanes[i].Retry = engine.RetryPolicy{MaxAttempts: 100}
	}
	_, err = simulate.Run(context.Background(), failing, simulate.Options{MaxSteps: 300, Retry: retryNow{},
		Config: engine.Config{Lanes: lanes}})
	require.ErrorIs(t, err, simulate.ErrLimit)
	require.ErrorContains(t, err, "by then 0 of 20 tasks had ended")
	require.ErrorContains(t, err, "tasks keep being retried; look at the retry policy's answers")

	long := []simulate.Submission{{Agent: "a", Duration: time.Hour}}
	_, err = simulate.Run(context.Background(), long, simulate.Options{Horizon: time.Minute})
	require.ErrorIs(t, err, simulate.ErrLimit)
	require.ErrorContains(t, err, "after the last submission")
}

func TestARunStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	subs := realistic(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The policy cancels the run from inside it, after some decisions.
	stop := &cancelAfter{n: 20, cancel: cancel}
	_, err := simulate.Run(ctx, subs, simulate.Options{Fairness: stop, Config: engine.Config{AgentMaxInFlight: 4}})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "simulation stopped")
}

// cancelAfter answers like oldestHead and cancels a context at its n-th call.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Pick(pc policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return oldestHead{}.Pick(pc, cands, picks)
}

func TestTheReportShowsSelectionEffectsByPriorityAndLabel(t *testing.T) {
	t.Parallel()
	subs := realistic(t)
	for i := range subs {
		// One lane, so that the priorities compete in its queues (the
		// realistic workload gives each priority a lane of its own).
		subs[i].Outcome, subs[i].Deadline, subs[i].Lane = "ok", 0, "main"
		subs[i].Labels = map[string]string{"kind": []string{"search", "checkout"}[i%2]}
	}
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 2}}}
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg})
	require.NoError(t, err)
	require.Len(t, rep.ByPriority, 4)
	require.Equal(t, "CRITICAL", rep.ByPriority[0].Group)
	require.Equal(t, "LOW", rep.ByPriority[3].Group)
	require.Equal(t, 100, rep.ByPriority[0].Dispatched)
	require.Less(t, rep.ByPriority[0].MeanPosition, rep.ByPriority[3].MeanPosition, "the built-in selection serves CRITICAL before LOW")
	require.Equal(t, []string{"kind=checkout", "kind=search"}, []string{rep.ByLabel[0].Group, rep.ByLabel[1].Group})
	require.Equal(t, 200, rep.ByLabel[0].Submitted)
}

// coded is a workload with error codes: six tasks whose every attempt fails
// with element_not_found, six whose first attempt fails with tab_not_found
// and whose second succeeds, and four that succeed.
const coded = `{"atMs": 0, "agent": "a", "durationMs": 10, "outcome": "transient", "code": "element_not_found"}
{"atMs": 1, "agent": "a", "durationMs": 10, "attempts": [{"outcome": "transient", "code": "tab_not_found"}]}
{"atMs": 2, "agent": "b", "durationMs": 10}
{"atMs": 3, "agent": "b", "durationMs": 10, "outcome": "transient", "code": "element_not_found"}
{"atMs": 4, "agent": "b", "durationMs": 10, "attempts": [{"outcome": "transient", "code": "tab_not_found"}, {"outcome": "ok"}]}
{"atMs": 5, "agent": "a", "durationMs": 10, "outcome": "transient", "code": "element_not_found"}
{"atMs": 6, "agent": "a", "durationMs": 10, "attempts": [{"outcome": "transient", "code": "tab_not_found"}]}
{"atMs": 7, "agent": "b", "durationMs": 10}
{"atMs": 8, "agent": "b", "durationMs": 10, "outcome": "transient", "code": "element_not_found"}
{"atMs": 9, "agent": "b", "durationMs": 10, "attempts": [{"outcome": "transient", "code": "tab_not_found"}]}
{"atMs": 10, "agent": "a", "durationMs": 10, "outcome": "transient", "code": "element_not_found"}
{"atMs": 11, "agent": "a", "durationMs": 10, "attempts": [{"outcome": "transient", "code": "tab_not_found"}]}
{"atMs": 12, "agent": "b", "durationMs": 10}
{"atMs": 13, "agent": "b", "durationMs": 10, "outcome": "transient", "code": "element_not_found"}
{"atMs": 14, "agent": "b", "durationMs": 10, "attempts": [{"outcome": "transient", "code": "tab_not_found"}]}
{"atMs": 15, "agent": "a", "durationMs": 10}
`

// The retry figures show what a code-driven retry policy (the errcode
// example) did differently from the built-in backoff on a workload with
// error codes: the built-in retries element_not_found until the budget is
// spent and parks, errcode fails it at once; the built-in backs off a lost
// tab by a second, errcode retries it at once.
func TestTheReportShowsWhatTheRetryPolicyDidByErrorCode(t *testing.T) {
	t.Parallel()
	subs, err := simulate.ReadWorkload(strings.NewReader(coded))
	require.NoError(t, err)
	builtin, err := simulate.Run(context.Background(), subs, simulate.Options{Name: "built-in"})
	require.NoError(t, err)
	plugin, err := simulate.Run(context.Background(), subs, simulate.Options{Name: "errcode", Retry: errcode.New()})
	require.NoError(t, err)

	b := builtin.Retry
	require.Equal(t, 6*4+6*2+4, b.Attempts)
	require.Equal(t, 6*4+6, b.Failures)
	require.Equal(t, b.Failures, b.Decisions)
	require.Equal(t, 6*3+6, b.Retries)
	require.Equal(t, 6, b.Parked)
	require.Equal(t, 0, b.Failed)
	require.InDelta(t, 40.0/16, b.MeanAttempts, 1e-9)
	require.Equal(t, 2*time.Second, b.MeanDelay, "(6×(1+2+4) s + 6×1 s) / 24 retries")
	require.Equal(t, []simulate.CodeReport{
		{Code: "element_not_found", Failures: 24, Decisions: 24, Retries: 18, Parked: 6, MeanDelay: 7 * time.Second / 3, Tasks: 6, MeanAttempts: 4},
		{Code: "tab_not_found", Failures: 6, Decisions: 6, Retries: 6, MeanDelay: time.Second, Tasks: 6, MeanAttempts: 2},
	}, b.ByCode)

	p := plugin.Retry
	require.Equal(t, 6+6*2+4, p.Attempts)
	require.Equal(t, 12, p.Failures)
	require.Equal(t, 12, p.Decisions)
	require.Equal(t, 6, p.Retries)
	require.Equal(t, 0, p.Parked)
	require.Equal(t, 6, p.Failed)
	require.InDelta(t, 22.0/16, p.MeanAttempts, 1e-9)
	require.Equal(t, time.Duration(0), p.MeanDelay)
	require.Equal(t, []simulate.CodeReport{
		{Code: "element_not_found", Failures: 6, Decisions: 6, Failed: 6, Tasks: 6, MeanAttempts: 1},
		{Code: "tab_not_found", Failures: 6, Decisions: 6, Retries: 6, Tasks: 6, MeanAttempts: 2},
	}, p.ByCode)
}

// A workload without failures never asks the retry policy, and the report
// says so: no decisions, one attempt per task, no codes.
func TestAWorkloadWithoutFailuresNeverAsksTheRetryPolicy(t *testing.T) {
	t.Parallel()
	subs := simulate.Generate(simulate.Synthetic{Agents: 2, Tasks: 50, Seed: 2})
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{Retry: errcode.New()})
	require.NoError(t, err)
	require.Equal(t, simulate.RetryReport{Attempts: 50, MeanAttempts: 1}, rep.Retry)
}

// A failure past its task's deadline fails without asking the retry
// policy: it is a failure, not a decision.
func TestAFailurePastItsDeadlineIsNotADecision(t *testing.T) {
	t.Parallel()
	subs, err := simulate.ReadWorkload(strings.NewReader(
		`{"atMs": 0, "agent": "a", "durationMs": 50, "deadlineMs": 20, "outcome": "transient", "code": "upstream_503"}`))
	require.NoError(t, err)
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Retry.Failures)
	require.Equal(t, 0, rep.Retry.Decisions)
	require.Equal(t, 1, rep.Retry.Failed)
	// The deadline ends the attempt first: the engine's timeout code.
	require.Equal(t, []simulate.CodeReport{{Code: "timeout", Failures: 1, Failed: 1, Tasks: 1, MeanAttempts: 1}}, rep.Retry.ByCode)
}

func TestAWorkloadsCodesAndAttemptsAreCheckedAndRoundTrip(t *testing.T) {
	t.Parallel()
	subs, err := simulate.ReadWorkload(strings.NewReader(coded))
	require.NoError(t, err)
	require.Equal(t, "element_not_found", subs[0].Code)
	require.Equal(t, []simulate.AttemptOutcome{{Outcome: "transient", Code: "tab_not_found"}}, subs[1].Attempts)
	var buf bytes.Buffer
	require.NoError(t, simulate.WriteWorkload(&buf, subs))
	back, err := simulate.ReadWorkload(&buf)
	require.NoError(t, err)
	require.Equal(t, subs, back)

	for in, want := range map[string]string{
		`{"atMs":0,"agent":"a","durationMs":1,"code":"upstream_503"}`:                                 `line 1: code "upstream_503" is given for an attempt that succeeds`,
		`{"atMs":0,"agent":"a","durationMs":1,"outcome":"ok","code":"x"}`:                             `needs outcome transient or permanent`,
		`{"atMs":0,"agent":"a","durationMs":1,"outcome":"transient","code":"no spaces"}`:              `code "no spaces": only letters, digits`,
		`{"atMs":0,"agent":"a","durationMs":1,"attempts":[{"outcome":"transient","colour":"red"}]}`:   `unknown field "colour"`,
		`{"atMs":0,"agent":"a","durationMs":1,"attempts":[{"outcome":"flaky"}]}`:                      `attempts[0]: outcome must be ok, transient or permanent, got "flaky"`,
		`{"atMs":0,"agent":"a","durationMs":1,"attempts":[{"outcome":"ok"},{"code":"upstream_503"}]}`: `attempts[1]: code "upstream_503" is given for an attempt that succeeds`,
		`{"atMs":0,"agent":"a","durationMs":1,"outcome":"maybe"}`:                                     `outcome must be ok, transient or permanent`,
	} {
		_, err := simulate.ReadWorkload(strings.NewReader(in))
		require.ErrorContains(t, err, want, in)
	}
	long := `{"atMs":0,"agent":"a","durationMs":1,"attempts":[` + strings.Repeat(`{"outcome":"ok"},`, simulate.MaxAttempts) + `{"outcome":"ok"}]}`
	_, err = simulate.ReadWorkload(strings.NewReader(long))
	require.ErrorContains(t, err, "attempts lists at most 64 attempts, got 65")
}

// retryNow is a retry policy that retries every failure at once.
type retryNow struct{}

func (retryNow) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionRetry}
}
