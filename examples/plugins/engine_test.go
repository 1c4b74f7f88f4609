package plugins_test

// Each example observed through the engine: a small workload replayed by
// engine/simulate (or a scripted engine from engine/enginetest) with the
// plugin set as the engine's policy, against the built-in policies on the
// same workload.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/engine/simulate"
)

// burst is n submissions by agent in lane at the given time, each running
// for 100 ms.
func burst(agent, lane string, at time.Duration, n int) []simulate.Submission {
	subs := make([]simulate.Submission, n)
	for i := range subs {
		subs[i] = simulate.Submission{At: at, Agent: agent, Lane: lane, Duration: 100 * time.Millisecond}
	}
	return subs
}

// firstAgents returns the agents of the first n dispatches of a run.
func firstAgents(subs []simulate.Submission, rep *simulate.Report, n int) map[string]int {
	agent := map[string]string{}
	for i, id := range rep.Submitted {
		agent[id] = subs[i].Agent
	}
	got := map[string]int{}
	for _, id := range rep.Order[:n] {
		got[agent[id]]++
	}
	return got
}

func TestWFQThroughTheEngineSharesAOneAtATimeLaneByWeight(t *testing.T) {
	t.Parallel()
	w, err := load(t, "wfq.wasm", "").Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cfg := engine.Config{
		Lanes:  []engine.LaneConfig{{Name: "main", MaxInFlight: 1}},
		Agents: map[string]engine.AgentConfig{"heavy": {Weight: 3}, "light": {Weight: 1}},
	}
	subs := append(burst("heavy", "main", 0, 40), burst("light", "main", 0, 40)...)
	ctx := context.Background()

	plugin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Fairness: w, Name: "wfq"})
	require.NoError(t, err)
	got := firstAgents(subs, plugin, 40)
	require.InDelta(t, 30, got["heavy"], 1, "three dispatches in four for weight 3: %v", got)

	builtin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Name: "fair-share"})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"heavy": 40}, firstAgents(subs, builtin, 40),
		"the built-in sees two idle agents at every dispatch and prefers the heavier")
	require.Greater(t, plugin.Jain, builtin.Jain)
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestLanePriorityThroughTheEngineServesTheUrgentLaneFirst(t *testing.T) {
	t.Parallel()
	w, err := load(t, "lanepri.wasm", `{"priorities": {"1": 10}, "agingStepMs": 60000}`).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cfg := engine.Config{MaxInFlight: 1, Lanes: []engine.LaneConfig{{Name: "batch", MaxInFlight: 1}, {Name: "interactive", MaxInFlight: 1}}}
	// While a first task holds the only slot, batch work queues, then
	// interactive work.
	subs := burst("first", "batch", 0, 1)
	subs = append(subs, burst("etl", "batch", time.Millisecond, 5)...)
	subs = append(subs, burst("ui", "interactive", 2*time.Millisecond, 10)...)
	ctx := context.Background()

	plugin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Fairness: w, Name: "lane-priority"})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"first": 1, "ui": 10}, firstAgents(subs, plugin, 11), "lane 1 (interactive) before lane 0")

	builtin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Name: "fair-share"})
	require.NoError(t, err)
	require.Equal(t, 5, firstAgents(subs, builtin, 11)["etl"], "the built-in alternates the two idle agents")
}

func TestLanePriorityThroughTheEngineAgesALowLaneIn(t *testing.T) {
	t.Parallel()
	w, err := load(t, "lanepri.wasm", `{"priorities": {"1": 3}, "agingStepMs": 500}`).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cfg := engine.Config{MaxInFlight: 1, Lanes: []engine.LaneConfig{{Name: "batch", MaxInFlight: 1}, {Name: "interactive", MaxInFlight: 1}}}
	// While a first task holds the only slot, one batch task queues; then a
	// fresh interactive task arrives every 100 ms for 5 s. Interactive heads
	// never wait long, so only aging lets the batch task in, once it has
	// waited 3 steps (1.5 s).
	subs := burst("first", "interactive", 0, 1)
	subs[0].Duration = 50 * time.Millisecond
	subs = append(subs, burst("etl", "batch", time.Millisecond, 1)...)
	for i := range 50 {
		subs = append(subs, burst("ui", "interactive", 2*time.Millisecond+time.Duration(i)*100*time.Millisecond, 1)...)
	}
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Fairness: w, Name: "lane-priority"})
	require.NoError(t, err)
	etl := rep.Agents[0]
	require.Equal(t, "etl", etl.Agent)
	require.GreaterOrEqual(t, etl.WaitP50, 1500*time.Millisecond, "not before 3 steps of waiting")
	require.Less(t, etl.WaitP50, 2*time.Second, "but as soon as it has aged in, well before the stream ends")
}

func TestErrorClassRetryThroughTheEngine(t *testing.T) {
	t.Parallel()
	w, err := load(t, "errclass.wasm", "").Retry(backoff.Retry{})
	require.NoError(t, err)
	h := enginetest.New(t, &engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 10,
		Retry: engine.RetryPolicy{MaxAttempts: 5, Backoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute}}}})
	require.NoError(t, h.SetRetry("main", "error-class", w))

	throttled := h.Submit(enginetest.Spec("a").Obj()).ID
	server := h.Submit(enginetest.Spec("b").Obj()).ID
	timeout := h.Submit(enginetest.Spec("c").Obj()).ID
	fail := func(id string, status int) {
		t.Helper()
		require.NoError(t, h.Exec.Finish(id, engine.Outcome{Err: engine.Transient(errors.New("boom")), HTTPStatus: status}))
	}
	waits := func(id string) time.Duration {
		t.Helper()
		task := h.Get(id)
		require.Equal(t, engine.StateRetryWait, task.State, id)
		return task.NextRunAt.Sub(h.Clock.Now())
	}
	fail(throttled, 503)
	fail(server, 500)
	fail(timeout, 504)
	require.Equal(t, 4*time.Second, waits(throttled), "503: four times the lane's backoff")
	require.Equal(t, time.Second, waits(server), "500: the lane's backoff")
	require.Equal(t, time.Second, waits(timeout), "a timeout is retried once")

	h.Clock.Advance(time.Second) // server and timeout run again
	require.ElementsMatch(t, []string{server, timeout}, h.Exec.Running())
	fail(server, 500)
	fail(timeout, 504)
	require.Equal(t, 2*time.Second, waits(server), "500 again: doubled")
	require.Equal(t, engine.StateFailed, h.State(timeout), "a second timeout fails")

	h.Clock.Advance(3 * time.Second)
	fail(throttled, 429)
	require.Equal(t, 8*time.Second, waits(throttled), "429 after the second attempt: doubled too")
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

// agentsInOrder returns the agents of a run's dispatches, in order.
func agentsInOrder(subs []simulate.Submission, rep *simulate.Report) []string {
	agent := map[string]string{}
	for i, id := range rep.Submitted {
		agent[id] = subs[i].Agent
	}
	out := make([]string, len(rep.Order))
	for i, id := range rep.Order {
		out[i] = agent[id]
	}
	return out
}

func TestEDFThroughTheEngineRunsEarlierDeadlinesFirst(t *testing.T) {
	t.Parallel()
	w, err := load(t, "edf.wasm", "").Selection(priority.Selection{})
	require.NoError(t, err)
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}}
	// One agent: a first task holds the slot while four more queue, their
	// deadlines out of submission order (agents name them here).
	subs := burst("first", "main", 0, 1)
	for i, dl := range []time.Duration{40, 10, 0, 20} { // seconds; 0 = none
		s := simulate.Submission{At: time.Duration(i+1) * time.Millisecond, Agent: "a", Session: "one-queue",
			Deadline: dl * time.Second, Duration: 100 * time.Millisecond}
		subs = append(subs, s)
	}
	ctx := context.Background()
	plugin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Selection: w, Name: "edf"})
	require.NoError(t, err)
	builtin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Name: "priority"})
	require.NoError(t, err)
	index := map[string]int{}
	for i, id := range plugin.Submitted {
		index[id] = i
	}
	order := func(r *simulate.Report) []int {
		out := make([]int, len(r.Order))
		for i, id := range r.Order {
			out[i] = index[id]
		}
		return out
	}
	require.Equal(t, []int{0, 2, 4, 1, 3}, order(plugin), "deadlines 10 s, 20 s, 40 s, then none")
	require.Equal(t, []int{0, 1, 2, 3, 4}, order(builtin), "the built-in: same priority, submission order")
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestDRRThroughTheEngineTakesTurnsOfAQuantum(t *testing.T) {
	t.Parallel()
	w, err := load(t, "drr.wasm", `{"quantum": 2}`).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}}
	subs := append(burst("a", "main", 0, 6), burst("b", "main", time.Millisecond, 6)...)
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Fairness: w, Name: "drr"})
	require.NoError(t, err)
	// One task at a time, in turns of two: the engine asks for no more picks
	// than the lane can take (one), so each decision is one step of a turn.
	require.Equal(t, []string{"a", "a", "b", "b", "a", "a", "b", "b", "a", "a", "b", "b"}, agentsInOrder(subs, rep))
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestJitterThroughTheEngineSpreadsRetriesOfTasksThatFailedTogether(t *testing.T) {
	t.Parallel()
	w, err := load(t, "jitter.wasm", "").Retry(backoff.Retry{})
	require.NoError(t, err)
	retry := engine.RetryPolicy{MaxAttempts: 5, Backoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute}
	cfg := &engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 50, Retry: retry}}}
	spread := func(h *enginetest.Harness) map[time.Time]bool {
		var ids []string
		for range 20 {
			ids = append(ids, h.Submit(enginetest.Spec("a").Obj()).ID)
		}
		for _, id := range ids { // an instance restarts: everything fails at once, twice
			require.NoError(t, h.Exec.Fail(id, engine.Transient(errors.New("instance gone"))))
		}
		h.Clock.Advance(time.Second)
		for _, id := range ids {
			require.NoError(t, h.Exec.Fail(id, engine.Transient(errors.New("instance gone"))))
		}
		at := map[time.Time]bool{}
		for _, id := range ids {
			task := h.Get(id)
			require.Equal(t, engine.StateRetryWait, task.State)
			at[task.NextRunAt] = true
		}
		return at
	}
	plugin := enginetest.New(t, cfg)
	require.NoError(t, plugin.SetRetry("main", "jitter", w))
	require.Greater(t, len(spread(plugin)), 15, "decorrelated jitter: the second retries are spread")
	require.Len(t, spread(enginetest.New(t, cfg)), 1, "the built-in without jitter: one wave")
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

// ABI v2: vip reads the agents' ids (sdk.Names) and serves the named one
// first, whatever its index in the engine; checked from the engine's event
// log, as simulate reads it.
func TestVIPThroughTheEngineServesTheNamedAgentFirst(t *testing.T) {
	t.Parallel()
	w, err := load(t, "vip.wasm", `{"agents": ["boss"]}`).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	require.Equal(t, int32(2), w.Plugin().Version())
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}}
	// The first task takes the only slot; then two agents queue ahead of
	// the boss.
	subs := burst("early", "main", 0, 1)
	subs = append(subs, burst("a", "main", time.Millisecond, 5)...)
	subs = append(subs, burst("b", "main", 2*time.Millisecond, 5)...)
	subs = append(subs, burst("boss", "main", 3*time.Millisecond, 3)...)
	rep, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Fairness: w, Name: "vip"})
	require.NoError(t, err)
	agent := map[string]string{}
	for i, id := range rep.Submitted {
		agent[id] = subs[i].Agent
	}
	var order []string
	for _, id := range rep.Order {
		order = append(order, agent[id])
	}
	require.Equal(t, []string{"early", "boss", "boss", "boss"}, order[:4], "the boss goes first: %v", order)
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

// ABI v2: ratecap holds when every head's agent has started its quota in the
// window, and the engine dispatches nothing instead of its native order; it
// asks again when the hint elapses.
func TestRateCapThroughTheEngineHoldsInsteadOfHandingTheSlotOver(t *testing.T) {
	t.Parallel()
	w, err := load(t, "ratecap.wasm", `{"perWindow": 1, "windowMs": 1000}`).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	require.True(t, w.MayHold())
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4}}, AgentMaxInFlight: 4}
	subs := burst("greedy", "main", 0, 4) // four tasks of 100 ms, room for all at once
	ctx := context.Background()
	rep, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Fairness: w, Name: "ratecap"})
	require.NoError(t, err)
	require.Len(t, rep.Order, 4)
	// One start per second: the last starts at 3 s and ends at 3.1 s.
	require.Equal(t, 3100*time.Millisecond, rep.Makespan)
	require.Equal(t, 3*time.Second, rep.Agents[0].WaitP99)
	require.Zero(t, w.Plugin().Stats().Fallbacks)
	require.GreaterOrEqual(t, w.Plugin().Stats().Holds, uint64(3), "each of the three waits is a counted hold")

	builtin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Name: "fair-share"})
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, builtin.Makespan, "the built-in starts all four at once")
}
