package engine_test

// The randomized model test: thousands of random operation sequences run
// against a deterministic engine, while a simple reference model replays the
// engine's event stream and checks the invariants the engine promises:
//
//   - no ceiling (global, lane, agent, session, batch, instance) is ever
//     exceeded at the moment of a dispatch, whatever the cancellations, lease
//     expiries and limit changes around it;
//   - events chain: each state event starts from the state the previous one
//     left; a terminal state never changes; each task ends exactly once;
//   - slots are freed exactly once (no in-flight count goes negative) and the
//     engine's in-flight count always equals the model's;
//   - within a queue, dispatch follows the rank order (interrupt first, then
//     priority, then submission order);
//   - nothing accepted is lost: after a final drain every task has ended;
//   - nothing hangs on a task whose retries are spent: a task whose mode is
//     "fail" never parks; no task waits on a dependency that ended badly or
//     parked; a batch ends exactly once, when every task of it has ended or
//     parked, and never before.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

var (
	modelSeed  = flag.Uint64("model.seed", 0, "run the model test with this seed only")
	modelRuns  = flag.Int("model.runs", 1000, "random sequences per model test")
	modelTrace = flag.Bool("model.trace", false, "log every operation and event of the model test")
)

type mTask struct {
	id, agent, lane, session, queueKey, batch string
	prio                                      int
	front                                     bool
	seq                                       uint64
	state                                     engine.State
	holding                                   bool
	timedOut                                  bool // its slot is held by a timed-out attempt
	holdInst                                  string
	ends                                      int
	held                                      bool // WAITING, held by its lane's debounce
}

type model struct {
	tb       testing.TB
	tasks    map[string]*mTask
	lastSeq  uint64
	global   int
	laneMax  map[string]int
	agentMax int
	sessMax  int
	batchMax map[string]int
	instMax  map[string]int
	starts   int // attempts of the executor matched to ASSIGNED events so far

	failMode  map[string]bool     // tasks whose retries, when spent, end them FAILED
	deps      map[string][]string // each task's dependencies
	batchEnds map[string]int      // batch end events seen
}

// settled is engine.State.Settled, restated: nothing waits on such a task.
func settled(s engine.State) bool { return s.Terminal() || s == engine.StateParked }

// checkNothingHangs checks, once an operation's effects are all in, that no
// task waits on a dependency that ended badly or parked, and that every batch
// whose tasks have all ended or parked has ended.
func (m *model) checkNothingHangs() {
	m.tb.Helper()
	open := map[string]bool{}
	for _, t := range m.tasks {
		if t.batch != "" {
			open[t.batch] = open[t.batch] || !settled(t.state)
		}
		if t.state != engine.StateWaiting {
			continue
		}
		for _, d := range m.deps[t.id] {
			if dt := m.tasks[d]; dt != nil && settled(dt.state) && dt.state != engine.StateSucceeded {
				m.fail("%s waits on %s, which is %s", t.id, d, dt.state)
			}
		}
	}
	held := map[string]string{}
	for _, t := range m.tasks {
		if !t.held {
			continue
		}
		if t.session == "" {
			m.fail("%s is held by debounce but has no session", t.id)
		}
		k := t.lane + "/" + t.session
		if other, dup := held[k]; dup {
			m.fail("%s and %s are both held for session %s in lane %s: a burst keeps one", other, t.id, t.session, t.lane)
		}
		held[k] = t.id
	}
	for b, isOpen := range open {
		if !isOpen && m.batchEnds[b] != 1 {
			m.fail("batch %s: every task has settled but it ended %d times", b, m.batchEnds[b])
		}
	}
}

func (m *model) holdingWhere(f func(*mTask) bool) int {
	n := 0
	for _, t := range m.tasks {
		if t.holding && f(t) {
			n++
		}
	}
	return n
}

func (m *model) fail(format string, args ...any) {
	m.tb.Helper()
	m.tb.Fatalf("model: "+format, args...)
}

// apply checks one event against the model and updates it.
func (m *model) apply(ev engine.Event, x *enginetest.Executor) {
	m.tb.Helper()
	if ev.Seq <= m.lastSeq {
		m.fail("seq %d after %d", ev.Seq, m.lastSeq)
	}
	m.lastSeq = ev.Seq
	if ev.Type == engine.EventBatch {
		m.batchEnds[ev.BatchID]++
		if m.batchEnds[ev.BatchID] > 1 {
			m.fail("batch %s ended twice", ev.BatchID)
		}
		for _, t := range m.tasks {
			if t.batch == ev.BatchID && !settled(t.state) {
				m.fail("batch %s ended while its task %s is %s", ev.BatchID, t.id, t.state)
			}
		}
	}
	if ev.TaskID == "" {
		return
	}
	t := m.tasks[ev.TaskID]
	if *modelTrace {
		m.tb.Logf("event %d %s %s %s→%s %q", ev.Seq, ev.Type, ev.TaskID, ev.From, ev.To, ev.Reason)
	}
	if t == nil {
		if ev.Type != engine.EventState || ev.From != 0 {
			m.fail("first event of %s is %v %s→%s", ev.TaskID, ev.Type, ev.From, ev.To)
		}
		t = &mTask{id: ev.TaskID, agent: ev.AgentID, lane: ev.Lane, session: ev.SessionKey, batch: ev.BatchID, seq: ev.Seq}
		m.tasks[t.id] = t
	}
	switch ev.Type {
	case engine.EventReleased:
		if !t.holding || (t.state != engine.StateCancelled && !t.timedOut) {
			m.fail("%s released while holding=%v state=%s", t.id, t.holding, t.state)
		}
		t.holding = false
		return
	case engine.EventStale:
		return
	case engine.EventState:
	default:
		m.fail("unexpected event type %v", ev.Type)
	}
	if ev.From != t.state {
		m.fail("%s: event from %s but the model has it %s", t.id, ev.From, t.state)
	}
	if t.state.Terminal() {
		m.fail("%s: terminal state %s changed to %s", t.id, t.state, ev.To)
	}
	if ev.To == engine.StateAssigned {
		m.checkRank(t)
		if t.holding {
			m.fail("%s assigned while its timed-out attempt still holds its slot", t.id)
		}
		t.holding = true
		t.timedOut = false
		if x != nil { // in synchronous mode, attempts start in the order of their events
			starts := x.Starts()
			if m.starts >= len(starts) || starts[m.starts].TaskID != t.id {
				m.fail("%s assigned but the executor was not given it next", t.id)
			}
			t.holdInst = starts[m.starts].InstanceID
			m.starts++
		}
		m.checkCeilings(t)
	}
	if t.state.InFlight() && !ev.To.InFlight() && ev.To != engine.StateCancelled {
		if !t.holding {
			m.fail("%s left flight twice", t.id)
		}
		// An attempt that timed out ends at once but keeps its slot until
		// its executor returns (or its lease grace passes).
		t.timedOut = strings.Contains(ev.Reason, "timed out after ")
		t.holding = t.timedOut
	}
	if ev.To.Terminal() {
		t.ends++
	}
	if by, ok := strings.CutPrefix(ev.Reason, "debounced: superseded by "); ok {
		next := m.tasks[by]
		switch {
		case !t.held || ev.To != engine.StateCancelled:
			m.fail("%s superseded (→%s) but it was not held", t.id, ev.To)
		case next == nil || next.lane != t.lane || next.session != t.session:
			m.fail("%s superseded by %s, not a task of its lane and session", t.id, by)
		}
	}
	t.held = ev.To == engine.StateWaiting && strings.HasPrefix(ev.Reason, "debounce:")
	if ev.To == engine.StateParked && m.failMode[t.id] {
		m.fail("%s parked, but its retries when spent end it FAILED", t.id)
	}
	t.state = ev.To
}

func (m *model) checkRank(t *mTask) {
	for _, o := range m.tasks {
		if o == t || o.state != engine.StateQueued || o.holding || o.lane != t.lane || o.agent != t.agent || o.queueKey != t.queueKey {
			continue
		}
		if t.prio < 0 {
			return
		}
		better := o.front && !t.front || o.front == t.front && (o.prio < t.prio || o.prio == t.prio && o.seq < t.seq)
		if better {
			m.fail("%s (prio %d, seq %d) dispatched before %s (prio %d, seq %d) of the same queue", t.id, t.prio, t.seq, o.id, o.prio, o.seq)
		}
	}
}

func (m *model) checkCeilings(t *mTask) {
	check := func(what string, n, limit int) {
		if limit > 0 && n > limit {
			m.fail("dispatching %s: %s ceiling exceeded: %d > %d", t.id, what, n, limit)
		}
	}
	check("global", m.holdingWhere(func(*mTask) bool { return true }), m.global)
	check("lane "+t.lane, m.holdingWhere(func(o *mTask) bool { return o.lane == t.lane }), m.laneMax[t.lane])
	check("agent "+t.agent, m.holdingWhere(func(o *mTask) bool { return o.agent == t.agent }), m.agentMax)
	if t.session != "" {
		check("session "+t.session, m.holdingWhere(func(o *mTask) bool { return o.session == t.session }), m.sessMax)
	}
	if t.batch != "" {
		check("batch", m.holdingWhere(func(o *mTask) bool { return o.batch == t.batch }), m.batchMax[t.batch])
	}
	if t.holdInst != "" {
		check("instance "+t.holdInst, m.holdingWhere(func(o *mTask) bool { return o.holdInst == t.holdInst }), m.instMax[t.holdInst])
	}
}

func TestModel(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, rand.Uint64()}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	runs := *modelRuns
	if testing.Short() {
		runs = 200
	}
	for _, base := range seeds {
		for i := range runs {
			seed := base + uint64(i)
			ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runModel(t, seed) })
			if !ok {
				t.Fatalf("model test failed; rerun with: go test ./engine -run TestModel -model.seed=%d", seed)
			}
		}
	}
}

func runModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	laneMax := map[string]int{"main": 1 + r.IntN(4), "team": 1 + r.IntN(4)}
	teamExhausted := []engine.Exhausted{engine.ExhaustedPark, engine.ExhaustedFail}[r.IntN(2)]
	cfg := engine.Config{
		MaxInFlight:         2 + r.IntN(6),
		AgentMaxInFlight:    1 + r.IntN(3),
		SessionMaxInFlight:  1 + r.IntN(2),
		MaxQueuedPerSession: 3 + r.IntN(6),
		AgingThreshold:      time.Duration(r.IntN(3)) * 20 * time.Second,
		LeaseGrace:          time.Duration(1+r.IntN(5)) * time.Second,
		Lanes: []engine.LaneConfig{
			{Name: "main", MaxInFlight: laneMax["main"], Timeout: time.Duration(5+r.IntN(30)) * time.Second},
			{Name: "team", MaxInFlight: laneMax["team"], DropPolicy: engine.DropOldest, Timeout: 20 * time.Second, Exhausted: teamExhausted},
		},
	}
	h := enginetest.New(t, &cfg)
	m := &model{tb: t, tasks: map[string]*mTask{}, global: cfg.MaxInFlight, laneMax: laneMax,
		agentMax: cfg.AgentMaxInFlight, sessMax: cfg.SessionMaxInFlight, batchMax: map[string]int{}, instMax: map[string]int{},
		failMode: map[string]bool{}, deps: map[string][]string{}, batchEnds: map[string]int{}}
	ctx := context.Background()
	var submitted []string
	queueKeys := map[string]string{}
	prios := map[string]int{}
	fronts := map[string]bool{}
	sync := func() {
		t.Helper()
		require.NoError(t, h.Sync(ctx))
		evs, missed := h.Events().Read(m.lastSeq, 1<<20, nil)
		require.Zero(t, missed)
		for _, ev := range evs {
			if ev.Type == engine.EventState && ev.From == 0 {
				// Learn the task's queue key and rank inputs from the engine's record.
				tk := h.Get(ev.TaskID)
				qk := tk.Spec.Session()
				if qk == "" && m.batchMax[tk.Spec.BatchID] > 0 {
					qk = "\x00" + tk.Spec.BatchID
				}
				queueKeys[ev.TaskID], prios[ev.TaskID], fronts[ev.TaskID] = qk, int(tk.Spec.Priority), tk.Spec.QueueMode == engine.QueueInterrupt
				x := tk.Spec.Exhausted
				if x == "" && tk.Spec.Lane == "team" {
					x = teamExhausted
				}
				m.failMode[ev.TaskID], m.deps[ev.TaskID] = x == engine.ExhaustedFail, tk.Spec.DependsOn
			}
			m.apply(ev, h.Exec)
			if mt := m.tasks[ev.TaskID]; mt != nil && mt.queueKey == "" {
				mt.queueKey, mt.prio, mt.front = queueKeys[ev.TaskID], prios[ev.TaskID], fronts[ev.TaskID]
			}
		}
		holding := m.holdingWhere(func(*mTask) bool { return true })
		require.Equal(t, holding, h.Stats(ctx).InFlight, "engine and model disagree on the tasks in flight")
		m.checkNothingHangs()
	}
	pick := func(ids []string) string {
		if len(ids) == 0 {
			return ""
		}
		return ids[r.IntN(len(ids))]
	}
	agents := []string{"a", "b", "c"}
	sessions := []string{"", "", "s1", "s2"}
	lanes := []string{"main", "team"}
	newSpec := func() engine.TaskSpec {
		b := enginetest.Spec(agents[r.IntN(len(agents))]).Lane(lanes[r.IntN(2)]).Session(sessions[r.IntN(len(sessions))]).
			Priority(engine.Priority(r.IntN(4)))
		if r.IntN(5) == 0 && len(submitted) > 0 {
			b.DependsOn(pick(submitted))
		}
		if r.IntN(6) == 0 {
			b.Deadline(h.Clock.Now().Add(time.Duration(1+r.IntN(120)) * time.Second))
		}
		if r.IntN(4) == 0 {
			b.Timeout(time.Duration(1+r.IntN(10)) * time.Second)
		}
		if r.IntN(15) == 0 && b.Obj().SessionKey != "" {
			b.Interrupt()
		}
		if r.IntN(8) == 0 {
			b.Retry(engine.RetryPolicy{MaxAttempts: 1 + r.IntN(3), Backoff: time.Duration(r.IntN(3)) * time.Second, Multiplier: 2, MaxBackoff: time.Minute})
		}
		spec := b.Obj()
		if r.IntN(5) == 0 {
			spec.Exhausted = []engine.Exhausted{engine.ExhaustedPark, engine.ExhaustedFail}[r.IntN(2)]
		}
		return spec
	}
	record := func(tk *engine.Task) {
		if tk != nil && !slices.Contains(submitted, tk.ID) {
			submitted = append(submitted, tk.ID)
		}
	}
	steps := 20 + r.IntN(60)
	logf := func(format string, args ...any) {
		if *modelTrace {
			t.Logf(format, args...)
		}
	}
	for step := 0; step < steps; step++ {
		op := r.IntN(20)
		logf("step %d op %d running=%v", step, op, h.Exec.Running())
		switch {
		case op < 5: // submit
			tk, err := h.Engine.Submit(ctx, newSpec())
			if err != nil && !engine.IsCode(err, engine.CodeQueueFull) && !engine.IsCode(err, engine.CodeInvalidInput) {
				t.Fatalf("submit: %v", err)
			}
			record(tk)
		case op < 6: // a batch, maybe with a parallelism cap
			par := r.IntN(3)
			items := make([]engine.BatchItem, 1+r.IntN(4))
			for i := range items {
				items[i] = engine.BatchItem{Spec: newSpec()}
			}
			res, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: items, Parallelism: par})
			require.NoError(t, err)
			m.batchMax[res.BatchID] = par
			for _, it := range res.Items {
				record(it.Task)
			}
		case op < 10: // finish an attempt: ok, transient or permanent
			id := pick(h.Exec.Running())
			if id == "" {
				continue
			}
			switch r.IntN(4) {
			case 0, 1:
				_ = h.Exec.Succeed(id, `{}`)
			case 2:
				_ = h.Exec.Fail(id, engine.Transient(errors.New("transient")))
			default:
				_ = h.Exec.Fail(id, engine.Permanent(errors.New("permanent")))
			}
		case op < 11: // an attempt reaches its instance
			if id := pick(h.Exec.Running()); id != "" {
				if run := h.Exec.Run(id); run != nil {
					run.Started(run.InstanceID(), "tab-"+id)
				}
			}
		case op < 13:
			h.Clock.Advance(time.Duration(r.IntN(70000)) * time.Millisecond)
		case op < 14:
			_, _ = h.Cancel(ctx, pick(submitted), "model cancel")
		case op < 15:
			_, err := h.CancelWhere(ctx, engine.TaskFilter{AgentID: agents[r.IntN(3)], Lane: lanes[r.IntN(2)]}, "model filter")
			require.NoError(t, err)
		case op < 16:
			_, err := h.StopSession(ctx, sessions[2+r.IntN(2)], r.IntN(2) == 0)
			require.NoError(t, err)
		case op < 17:
			if r.IntN(2) == 0 { // debounce on (up to 2 s) or off
				d := time.Duration(r.IntN(3)) * time.Second
				_, err := h.UpdateLane(ctx, lanes[r.IntN(2)], engine.LaneUpdate{Debounce: &d})
				require.NoError(t, err)
				break
			}
			p := r.IntN(3) == 0
			_, err := h.UpdateLane(ctx, lanes[r.IntN(2)], engine.LaneUpdate{Paused: &p})
			require.NoError(t, err)
		case op < 18:
			l := lanes[r.IntN(2)]
			n := r.IntN(5)
			_, err := h.UpdateLane(ctx, l, engine.LaneUpdate{MaxInFlight: &n})
			require.NoError(t, err)
			m.laneMax[l] = n
			if n == 0 {
				m.laneMax[l] = -1 // the model's checkCeilings treats ≤ 0 as no cap; 0 must admit nothing
			}
		case op < 19:
			id := pick(submitted)
			if id != "" {
				if r.IntN(2) == 0 {
					_, _ = h.Reset(ctx, id)
				} else {
					tk, _ := h.Retry(ctx, id)
					record(tk)
				}
			}
		default: // instances come and go
			id := fmt.Sprintf("i%d", r.IntN(3))
			if r.IntN(4) == 0 {
				h.RemoveInstance(id)
				m.instMax[id] = -1
			} else {
				c := 1 + r.IntN(3)
				h.SetInstance(engine.InstanceInfo{ID: id, Capacity: c, Healthy: r.IntN(5) > 0})
				m.instMax[id] = c
			}
		}
		sync()
	}

	// Drain: open everything up and let all work finish.
	for _, l := range lanes {
		open, n := false, 4
		_, err := h.UpdateLane(ctx, l, engine.LaneUpdate{Paused: &open, MaxInFlight: &n})
		require.NoError(t, err)
		m.laneMax[l] = n
	}
	for i := range 3 {
		id := fmt.Sprintf("i%d", i)
		h.SetInstance(engine.InstanceInfo{ID: id, Capacity: 3, Healthy: true})
		m.instMax[id] = 3
	}
	sync()
	for round := 0; ; round++ {
		if round == 500 {
			for _, mt := range m.tasks {
				if !mt.state.Terminal() || mt.holding {
					t.Logf("stuck: %s %s holding=%v agent=%s lane=%s session=%q batch=%q", mt.id, mt.state, mt.holding, mt.agent, mt.lane, mt.session, mt.batch)
				}
			}
			p, _ := h.Plan(ctx, 10)
			t.Logf("plan: %+v", p)
			t.Fatal("the drain does not converge")
		}
		for _, id := range h.Exec.Running() {
			_ = h.Exec.Succeed(id, `{}`)
		}
		h.Clock.Advance(2 * time.Minute)
		sync()
		live := 0
		for _, mt := range m.tasks {
			switch {
			case mt.state == engine.StateParked:
				_, err := h.Cancel(ctx, mt.id, "drain")
				require.NoError(t, err)
				live++ // its timed-out attempt may still hold its slot
			case !mt.state.Terminal() || mt.holding:
				live++
			}
		}
		sync()
		if live == 0 {
			break
		}
	}
	for _, mt := range m.tasks {
		require.True(t, mt.state.Terminal(), "%s ended %s", mt.id, mt.state)
		require.Equal(t, 1, mt.ends, "%s ended %d times", mt.id, mt.ends)
		require.False(t, mt.holding, "%s still holds a slot", mt.id)
	}
	for _, id := range submitted {
		require.Contains(t, m.tasks, id, "an accepted task has no events")
	}
	require.Zero(t, h.Stats(ctx).InFlight)
}
