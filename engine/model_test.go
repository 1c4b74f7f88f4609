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
//     parked, and never before;
//   - a pull lane's tasks go to workers only (Engine.Pull), never to the
//     executor: a lease marks its task RUNNING at once, under every ceiling
//     and the worker's max; each task is held by at most one lease (the
//     engine's leases, Engine.Leased, are the model's, one per task, and a
//     superseded lease can neither end nor renew the attempt); a renewal
//     is capped by the task's deadline; a lease that runs out ends its
//     attempt exactly its lease grace after it ran out, never before, and
//     a cancelled task's lease gives its slot back within the grace;
//   - the fairness policy decides a pull lane's leases: a lease takes first
//     the head the policy picks first (the model's policy: the newest head,
//     checked when no ceiling is in the way); while it holds the
//     lane's heads a lease takes nothing, the head it held is announced
//     once (HELD) and its end once (HOLD_ENDED), by a pull or a change of
//     policy only;
//   - a lane changes kind (UpdateLane with Pull) only when nothing of it is
//     live: the switch is refused, with CONFLICT, while a task of the lane
//     has not ended or an attempt of it still holds a slot, and is made at
//     once when none has. So no lease and no pushed attempt straddles a
//     switch, and nothing queued is lost or goes both ways. From the switch
//     on, the lane's tasks go only its new way: a pull lane's to workers (a
//     pushed dispatch never takes one), a pushed lane's to the executor (a
//     Pull of it is refused with CONFLICT and leases nothing); a lease made
//     before the switch ends nothing and renews nothing after it; the
//     fairness policy holds a lane's heads only while it is a pull lane;
//   - a restart (the engine stopped, a new one started on the same store,
//     which says it is durable in half the runs) loses nothing and ends
//     nothing twice: no task, and no batch that ended before it (one of
//     whose tasks may be PARKED, and end after it). Stopped by Shutdown, the pushed
//     attempts under way end CANCELLED ("shutdown"), and on a store that is
//     not durable so does every task that has not ended; stopped by a crash
//     (nothing more reaches the store), a pushed attempt under way counts as
//     one interrupted attempt ("interrupted: the server stopped while it ran") and its retry policy
//     decides. On a durable store every leased (RUNNING) pull task stays
//     RUNNING, through Shutdown and crash alike, under the same lease id and
//     attempt: the new engine resumes the lease for its lane's timeout
//     (capped by the task's deadline), says so in the task's reason and
//     announces it once (LEASE_RESUMED), and its worker ends or renews it as
//     before. No other slot survives the restart (the new engine's in flight
//     are the resumed leases), nor a hold of the fairness policy (the new
//     engine announces what its own decisions hold); the model's view goes
//     on from the new engine's first events;
//   - a Pull answers: one that cannot make progress (a broken invariant)
//     fails with an error, which fails the model, instead of looping for
//     ever under the engine's lock;
//   - the attempt budget is the engine's: in half the runs every lane's
//     retry policy is one that retries every failure (at once or after a
//     delay, deciding under the lock or outside it), and still no task has
//     more attempts (since its last reset, but for those handed back) than
//     its maxAttempts — its own, else its lane's; a task whose mode is
//     "fail" still never parks;
//   - at the end every task's state and reason are the model's: those of
//     its last state event, or of the resumption of its lease.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/store/memory"
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

	pull        bool      // a task of a pull lane: workers lease it
	deadline    time.Time // its spec's deadline, which caps a lease
	reason      string    // the reason of its latest state event
	leases      int       // its leases so far (ASSIGNED events, for a pull task)
	leasing     bool      // a pull task just ASSIGNED: its next event makes it RUNNING
	leaseUntil  time.Time // when its current lease runs out
	cancelledAt time.Time // when it was cancelled while leased
	announced   bool      // announced held (EventHeld), not ended since
	resumed     bool      // its lease was resumed by the restart under way
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

	pullLanes map[string]bool // the lanes whose tasks workers lease
	grace     time.Duration   // the engine's LeaseGrace
	holdOK    bool            // the operation under way may announce holds or end them (a pull, a change of policy)

	durable     bool                     // the store survives a restart: leases are resumed
	restarting  bool                     // a new engine is starting on the store: it may resume leases
	laneTimeout map[string]time.Duration // each lane's timeout: a resumed lease's term
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
		k := t.lane + "/" + t.agent + "/" + t.session // a session is its agent's own
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
		t = &mTask{id: ev.TaskID, agent: ev.AgentID, lane: ev.Lane, session: ev.SessionKey, batch: ev.BatchID, seq: ev.Seq, pull: m.pullLanes[ev.Lane]}
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
	case engine.EventHeld, engine.EventHoldEnded:
		held := ev.Type == engine.EventHeld
		switch {
		case !m.holdOK:
			m.fail("%s: %v outside a pull or a change of policy", t.id, ev.Type)
		case !t.pull:
			m.fail("%s: %v, but the model's policy holds only a pull lane's heads", t.id, ev.Type)
		case t.state != engine.StateQueued:
			m.fail("%s: %v while %s", t.id, ev.Type, t.state)
		case t.announced == held:
			m.fail("%s: %v, but announced held is %v already", t.id, ev.Type, t.announced)
		}
		t.announced = held
		return
	case engine.EventLeaseResumed:
		switch {
		case !m.restarting || !m.durable:
			m.fail("%s: its lease resumed outside a restart on a durable store", t.id)
		case !t.pull || t.state != engine.StateRunning || !t.holding || t.leasing:
			m.fail("%s: its lease resumed, but it is %s (pull %v, holding %v), not a pull task leased RUNNING", t.id, t.state, t.pull, t.holding)
		case t.resumed:
			m.fail("%s: its lease resumed twice in one restart", t.id)
		case !strings.HasPrefix(ev.Reason, "lease resumed after a restart for "):
			m.fail("%s: its lease resumed, but the event says %q", t.id, ev.Reason)
		}
		t.resumed = true
		t.reason = ev.Reason
		t.leaseUntil = ev.At.Add(m.laneTimeout[t.lane])
		if !t.deadline.IsZero() && t.deadline.Before(t.leaseUntil) {
			t.leaseUntil = t.deadline
		}
		return
	case engine.EventState:
	default:
		m.fail("unexpected event type %v", ev.Type)
	}
	if t.leasing {
		if ev.From != engine.StateAssigned || ev.To != engine.StateRunning || !strings.HasPrefix(ev.Reason, "leased by ") {
			m.fail("%s: leased, then %s→%s %q, not RUNNING under its lease", t.id, ev.From, ev.To, ev.Reason)
		}
		t.leasing = false
	}
	if t.pull && ev.From == engine.StateRunning && strings.Contains(ev.Reason, "lease expired (attempt ") {
		if want := t.leaseUntil.Add(m.grace); !ev.At.Equal(want) {
			m.fail("%s: its lease, due to run out at %v, expired at %v, not %v (its grace after)", t.id, t.leaseUntil, ev.At, want)
		}
	}
	if t.pull && ev.To == engine.StateCancelled && t.holding {
		t.cancelledAt = ev.At
	}
	if ev.To != engine.StateQueued {
		t.announced = false // its state event says it is no longer held
	}
	t.reason = ev.Reason
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
		if !t.deadline.IsZero() && ev.At.After(t.deadline) {
			m.fail("%s dispatched at %v, past its deadline %v", t.id, ev.At, t.deadline)
		}
		t.holding = true
		t.timedOut = false
		if t.pull != m.pullLanes[t.lane] {
			m.fail("%s assigned (%q), but its lane %s changed kind (pull %v) while it was live", t.id, ev.Reason, t.lane, m.pullLanes[t.lane])
		}
		if t.pull {
			if !strings.HasPrefix(ev.Reason, "leased") {
				m.fail("%s: leased, but its ASSIGNED event says %q", t.id, ev.Reason)
			}
			t.leases++
			t.leasing = true
			t.holdInst = ""
		} else if ev.Reason != "dispatched" {
			m.fail("%s: dispatched, but its ASSIGNED event says %q", t.id, ev.Reason)
		} else if x != nil { // in synchronous mode, attempts start in the order of their events
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
		case next == nil || next.lane != t.lane || next.session != t.session || next.agent != t.agent:
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

// newestPullHead returns the task a pull of the pull lane named lane leases
// first under modelFair (newest head first): of each agent's queue in the
// lane, its head (the best by rank of its QUEUED tasks), and of those the
// one submitted last. It returns nil when a ceiling could keep a queue's
// head out of the decision or refuse the policy's pick (the model does not
// follow which queues the engine has parked), or when nothing is queued.
func (m *model) newestPullHead(lane string) *mTask {
	all := m.holdingWhere(func(*mTask) bool { return true })
	if all >= m.global || m.laneMax[lane] < 0 || m.holdingWhere(func(o *mTask) bool { return o.lane == lane }) >= m.laneMax[lane] {
		return nil
	}
	heads := map[string]*mTask{}
	for _, t := range m.tasks {
		if !t.pull || t.lane != lane || t.state != engine.StateQueued || t.holding {
			continue
		}
		switch {
		case m.holdingWhere(func(o *mTask) bool { return o.agent == t.agent }) >= m.agentMax,
			t.session != "" && m.holdingWhere(func(o *mTask) bool { return o.sameSession(t) }) >= m.sessMax,
			t.batch != "" && m.batchMax[t.batch] > 0 && m.holdingWhere(func(o *mTask) bool { return o.batch == t.batch }) >= m.batchMax[t.batch]:
			return nil
		}
		h := heads[t.agent]
		if h == nil || t.front && !h.front || t.front == h.front && (t.prio < h.prio || t.prio == h.prio && t.seq < h.seq) {
			heads[t.agent] = t
		}
	}
	var newest *mTask
	for _, h := range heads {
		if newest == nil || h.seq > newest.seq {
			newest = h
		}
	}
	return newest
}

// sameSession reports whether o is of t's session: a session key is its
// agent's own (engine.TaskSpec.SessionScope).
func (o *mTask) sameSession(t *mTask) bool {
	return o.session == t.session && o.agent == t.agent
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
		check("session "+t.session+" of agent "+t.agent, m.holdingWhere(func(o *mTask) bool { return o.sameSession(t) }), m.sessMax)
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

// modelFair is the model's fairness policy other than the native one: it
// picks the candidates' heads newest first (the native order's reverse),
// and while hold is set it holds a pull lane's heads (it holds nothing of
// pushed dispatch, which the model checks as before).
type modelFair struct {
	mu     sync.Mutex
	hold   bool
	hintMs int64
	inline bool
	pull   *sync.Map // the names of the pull lanes (a pull's candidates are all of its lane)
}

func (f *modelFair) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	f.mu.Lock()
	hold, hint := f.hold, f.hintMs
	f.mu.Unlock()
	if hold && ctx.Names != nil && len(cands) > 0 {
		if _, pull := f.pull.Load(ctx.Names.LaneName(0)); pull {
			return policy.Hold(hint)
		}
	}
	n := min(len(picks), len(cands))
	for i := range n {
		picks[i] = uint32(len(cands) - 1 - i)
	}
	return n
}

func (f *modelFair) set(hold bool, hintMs int64) {
	f.mu.Lock()
	f.hold, f.hintMs = hold, hintMs
	f.mu.Unlock()
}

func (f *modelFair) holding() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hold
}

func (f *modelFair) Stateless() bool { return true }
func (f *modelFair) MayHold() bool   { return true }
func (f *modelFair) Inline() bool    { return f.inline }

// greedyRetry is the model's retry policy other than the native one: it
// retries every failure, permanent or not, whatever the attempt, after
// delayMs — a policy that ignores the budget it is given.
type greedyRetry struct {
	inline  bool
	delayMs int64
}

func (g greedyRetry) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionRetry, DelayMs: g.delayMs}
}

func (g greedyRetry) Inline() bool { return g.inline }

// mLease is a lease the model's workers were given.
type mLease struct {
	run  *engine.Run
	task *mTask
	gen  int // its task's lease count when it was made: the newest lease is current
}

// current reports whether l is its task's attempt under way, as a worker
// holding it may end it.
func (l *mLease) current() bool {
	return l.gen == l.task.leases && l.task.state == engine.StateRunning
}

// modelStore is the model's store, one for each engine started on the
// memory store the run keeps: it says it is durable or not, as the run
// chose, and once its engine has crashed nothing that engine writes reaches
// the memory store any more.
type modelStore struct {
	*memory.Store
	durable bool
	crashed atomic.Bool
}

func (s *modelStore) Durable() bool { return s.durable }

func (s *modelStore) Commit(ctx context.Context, b *engine.Batch) error {
	if s.crashed.Load() {
		return nil // written by an engine that is gone: lost with it
	}
	return s.Store.Commit(ctx, b)
}

func runModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	laneMax := map[string]int{"main": 1 + r.IntN(4), "team": 1 + r.IntN(4), "jobs": 1 + r.IntN(4)}
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
			{Name: "jobs", Pull: true, MaxInFlight: laneMax["jobs"], Timeout: 30 * time.Second},
		},
	}
	ctx := context.Background()
	// The engine: synchronous, over a fake clock and a memory store that
	// says it is durable in half the runs. A restart starts another on the
	// same memory store (restart, below).
	durable := r.IntN(2) == 0
	mem := memory.New(memory.Options{})
	h := &enginetest.Harness{T: t, Clock: clock.NewFake(enginetest.Epoch), Store: mem, Exec: enginetest.NewExecutor()}
	var store *modelStore
	starts := 0
	startEngine := func() {
		t.Helper()
		starts++
		store = &modelStore{Store: mem, durable: durable}
		e, err := engine.New(enginetest.Synchronous(engine.Options{Config: cfg, Store: store, Executor: h.Exec, Clock: h.Clock, Seed: uint64(starts)}))
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		h.Engine = e
	}
	startEngine()
	t.Cleanup(func() {
		stop, cancel := context.WithCancel(context.Background())
		cancel()
		_ = h.Engine.Shutdown(stop)
	})
	m := &model{tb: t, tasks: map[string]*mTask{}, global: cfg.MaxInFlight, laneMax: laneMax,
		agentMax: cfg.AgentMaxInFlight, sessMax: cfg.SessionMaxInFlight, batchMax: map[string]int{}, instMax: map[string]int{},
		failMode: map[string]bool{}, deps: map[string][]string{}, batchEnds: map[string]int{},
		pullLanes: map[string]bool{"jobs": true}, grace: cfg.LeaseGrace, durable: durable, laneTimeout: map[string]time.Duration{}}
	for _, lc := range cfg.Lanes {
		m.laneTimeout[lc.Name] = lc.Timeout
	}
	pullSet := &sync.Map{} // the pull lanes, as the model's policy knows them
	pullSet.Store("jobs", true)
	// The fairness policy: the native one, or the model's, inline or
	// deciding outside the lock. policyName and policyImpl are the latest
	// set, which a restart sets again (as the plugin manager does at start).
	fair := &modelFair{inline: r.IntN(2) == 0, pull: pullSet}
	native := r.IntN(2) == 0
	var policyName string
	var policyImpl policy.Fairness
	setPolicy := func(name string, p policy.Fairness) {
		t.Helper()
		m.holdOK = true
		require.NoError(t, h.SetFairness(name, p))
		policyName, policyImpl = name, p
	}
	if !native {
		setPolicy("model", fair)
		m.holdOK = false
	}
	// The retry policy: the native one, or one that retries every failure
	// (greedyRetry), which a restart sets again.
	var greedy *greedyRetry
	if r.IntN(2) == 0 {
		greedy = &greedyRetry{inline: r.IntN(2) == 0, delayMs: int64(r.IntN(2)) * 1000}
		require.NoError(t, h.SetRetry("", "greedy", *greedy))
	}
	// checkBudgets checks that no task has started an attempt past its
	// budget: its attempts since its last reset, but for those handed back
	// (and those that ended in an instance fault, which the model makes
	// none of), are at most its maxAttempts.
	checkBudgets := func() {
		t.Helper()
		for id := range m.tasks {
			tk := h.Get(id)
			budget := engine.DefaultRetryPolicy().MaxAttempts // the model's lanes have no retry policy of their own
			if tk.Spec.Retry != nil {
				budget = tk.Spec.Retry.MaxAttempts
			}
			for _, a := range tk.Attempts {
				if a.EndedAt.IsZero() != (a.EndedBy == engine.EndedByUnknown) {
					m.fail("%s: attempt %d ended at %v, recorded as ended by %q", id, a.N, a.EndedAt, a.EndedBy)
				}
				if a.Code == engine.CodeRestart && a.EndedBy != engine.EndedByEngine {
					m.fail("%s: attempt %d was interrupted (code %s), but records %q as its ender", id, a.N, a.Code, a.EndedBy)
				}
			}
			n := 0
			for _, a := range tk.Attempts[min(tk.ResetAt, len(tk.Attempts)):] {
				if !strings.HasPrefix(a.Error, "released: ") && !a.InstanceFault {
					n++
				}
			}
			if n > budget {
				m.fail("%s: %d attempts counted against a budget of %d (retry policy greedy: %v); it is %s (%q)", id, n, budget, greedy != nil, tk.State, tk.Reason)
			}
		}
	}
	instances := map[string]engine.InstanceInfo{} // registered and not removed: a restart registers them again
	var leases []*mLease
	newest := map[string]*mLease{} // each task's newest lease
	leaseIDs := map[uint64]bool{}  // the lease ids given since the engine started
	var submitted []string
	queueKeys := map[string]string{}
	deadlines := map[string]time.Time{}
	// checkLeases checks the leases against the engine's and the clock: the
	// engine's leases under way are the model's newest, one per task, and
	// no lease outlives its grace.
	checkLeases := func() {
		t.Helper()
		now := h.Clock.Now()
		got := map[string]*engine.Run{}
		for _, run := range h.Leased("") {
			if got[run.TaskID()] != nil {
				m.fail("%s is leased twice: leases %d and %d", run.TaskID(), got[run.TaskID()].LeaseID(), run.LeaseID())
			}
			got[run.TaskID()] = run
		}
		for _, mt := range m.tasks {
			if !mt.pull {
				continue
			}
			run := got[mt.id]
			delete(got, mt.id)
			switch {
			case !mt.holding && run != nil:
				m.fail("%s (%s) holds no slot in the model but the engine has its lease %d under way", mt.id, mt.state, run.LeaseID())
			case !mt.holding:
				continue
			case run == nil:
				m.fail("%s (%s) holds a slot in the model but the engine has no lease of it under way", mt.id, mt.state)
			case newest[mt.id] == nil || run != newest[mt.id].run:
				m.fail("%s: the engine's lease %d under way is not the newest lease a worker was given", mt.id, run.LeaseID())
			}
			switch {
			case mt.state == engine.StateRunning && !now.Before(mt.leaseUntil.Add(m.grace)):
				m.fail("%s: its lease ran out at %v and its grace of %v has passed, but it is still RUNNING at %v", mt.id, mt.leaseUntil, m.grace, now)
			case mt.state == engine.StateCancelled && !now.Before(mt.cancelledAt.Add(m.grace)):
				m.fail("%s: cancelled at %v while leased, it still holds its slot at %v, past its grace of %v", mt.id, mt.cancelledAt, now, m.grace)
			}
		}
		for id := range got {
			m.fail("the engine has a lease of %s under way, which the model does not know as a pull task", id)
		}
	}
	prios := map[string]int{}
	fronts := map[string]bool{}
	// readEvents applies the events of log the model has not seen.
	readEvents := func(log *engine.EventLog) []engine.Event {
		t.Helper()
		evs, missed := log.Read(m.lastSeq, 1<<20, nil)
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
				deadlines[ev.TaskID] = tk.Spec.Deadline
			}
			m.apply(ev, h.Exec)
			if mt := m.tasks[ev.TaskID]; mt != nil && mt.queueKey == "" {
				mt.queueKey, mt.prio, mt.front = queueKeys[ev.TaskID], prios[ev.TaskID], fronts[ev.TaskID]
				mt.deadline = deadlines[ev.TaskID]
			}
		}
		return evs
	}
	sync := func() []engine.Event {
		t.Helper()
		require.NoError(t, h.Sync(ctx))
		evs := readEvents(h.Events())
		holding := m.holdingWhere(func(*mTask) bool { return true })
		require.Equal(t, holding, h.Stats(ctx).InFlight, "engine and model disagree on the tasks in flight")
		require.Len(t, h.Exec.Starts(), m.starts, "the executor started an attempt the model has no push dispatch for")
		m.checkNothingHangs()
		checkLeases()
		checkBudgets()
		return evs
	}
	pick := func(ids []string) string {
		if len(ids) == 0 {
			return ""
		}
		return ids[r.IntN(len(ids))]
	}
	agents := []string{"a", "b", "c"}
	sessions := []string{"", "", "s1", "s2"}
	lanes := []string{"main", "team", "jobs"}
	newSpec := func() engine.TaskSpec {
		b := enginetest.Spec(agents[r.IntN(len(agents))]).Lane(lanes[r.IntN(len(lanes))]).Session(sessions[r.IntN(len(sessions))]).
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
	// lease is a worker's Pull of up to max of the tasks of the lane named
	// lane: the model registers the leases, then checks what the engine did
	// with them. A lane that is not a pull lane (now) refuses the pull.
	lease := func(lane string, max int, leaseFor time.Duration, worker string) []*mLease {
		t.Helper()
		sync() // the model's view, for the policy's expected pick
		if !m.pullLanes[lane] {
			m.holdOK = true // a HELD event now fails the check below, not this one
			runs, err := h.Pull(ctx, lane, max, leaseFor, worker)
			m.holdOK = false
			if !engine.IsCode(err, engine.CodeConflict) || len(runs) > 0 {
				m.fail("a pull of lane %s, whose tasks are pushed, leased %d: %v (not a CONFLICT)", lane, len(runs), err)
			}
			for _, ev := range sync() {
				if ev.Type != engine.EventEngine {
					m.fail("a refused pull of lane %s recorded %v of %s", lane, ev.Type, ev.TaskID)
				}
			}
			return nil
		}
		now := h.Clock.Now()
		holds := !native && fair.holding()
		var first *mTask // the head the model's policy leases first, when no ceiling is in the way
		if !native && !holds {
			first = m.newestPullHead(lane)
		}
		m.holdOK = true
		runs, err := h.Pull(ctx, lane, max, leaseFor, worker)
		require.NoError(t, err)
		if first != nil && len(runs) > 0 && runs[0].TaskID() != first.id {
			m.fail("the policy picks the newest head first, %s (seq %d), but the pull leased %s first", first.id, first.seq, runs[0].TaskID())
		}
		if len(runs) > max {
			m.fail("a pull of %d leased %d", max, len(runs))
		}
		if holds && len(runs) > 0 {
			m.fail("the fairness policy holds the pull lane's heads, yet a pull leased %d", len(runs))
		}
		var made []*mLease
		for _, run := range runs {
			mt := m.tasks[run.TaskID()]
			if mt == nil || !mt.pull || mt.lane != lane {
				m.fail("a pull of the pull lane %s leased %s, not one of its tasks", lane, run.TaskID())
			}
			if leaseIDs[run.LeaseID()] {
				m.fail("%s: lease id %d given twice", mt.id, run.LeaseID())
			}
			leaseIDs[run.LeaseID()] = true
			l := &mLease{run: run, task: mt, gen: mt.leases + 1}
			mt.leaseUntil = now.Add(leaseFor)
			if !mt.deadline.IsZero() && mt.deadline.Before(mt.leaseUntil) {
				mt.leaseUntil = mt.deadline
			}
			leases, made = append(leases, l), append(made, l)
			newest[mt.id] = l
		}
		sync()
		m.holdOK = false
		// The pull's decision replaced the lane's hold: it stands only if
		// the policy held, and the heads announced held are the lane's.
		ph, held := h.PullHold(lane)
		switch {
		case held && (!holds || ph.Policy != "model" || !ph.Pull || ph.Lane != lane):
			m.fail("the pull lane %s is held (%+v), but the policy's latest decision did not hold (holds %v)", lane, ph, holds)
		case !held:
			for _, mt := range m.tasks {
				if mt.announced && mt.lane == lane {
					m.fail("%s: still announced held after a pull of its lane that did not hold", mt.id)
				}
			}
		}
		for _, mt := range m.tasks {
			if !mt.announced || mt.lane != lane {
				continue
			}
			if hd, ok := h.HoldOf(mt.id); !ok || hd != ph {
				m.fail("%s: announced held, but its hold is %+v (%v), not the lane's %+v", mt.id, hd, ok, ph)
			}
		}
		for _, l := range made {
			mt := l.task
			if l.gen != mt.leases || mt.state != engine.StateRunning {
				m.fail("%s: leased (lease %d of it), but the model has it %s after %d leases", mt.id, l.gen, mt.state, mt.leases)
			}
			if !strings.HasSuffix(mt.reason, " for "+leaseFor.String()) || !strings.Contains(mt.reason, worker) {
				m.fail("%s: leased by %s for %v, but its reason says %q", mt.id, worker, leaseFor, mt.reason)
			}
			if dl, _ := l.run.Deadline(); !dl.Equal(mt.leaseUntil) {
				m.fail("%s: its lease runs out at %v, not %v (now plus its term, capped by its deadline %v)", mt.id, dl, mt.leaseUntil, mt.deadline)
			}
		}
		return made
	}
	// someLease picks a lease a worker was given, more often one that is
	// under way.
	someLease := func() *mLease {
		if len(leases) == 0 {
			return nil
		}
		if r.IntN(4) > 0 {
			var cur []*mLease
			for _, l := range leases {
				if l.current() {
					cur = append(cur, l)
				}
			}
			if len(cur) > 0 {
				return cur[r.IntN(len(cur))]
			}
		}
		return leases[r.IntN(len(leases))]
	}
	// finish ends a lease's attempt as its worker does: a lease under way
	// ends its attempt, which records its worker as its ender, a cancelled
	// task's gives its slot back (the cancellation, the engine's, ended
	// the attempt), and any other is stale and changes nothing.
	finish := func(l *mLease, o engine.Outcome) {
		t.Helper()
		mt := l.task
		current := l.current()
		cancelled := l.gen == mt.leases && mt.state == engine.StateCancelled && mt.holding
		o.ByWorker = true // as package pull finishes a worker's call
		l.run.Finish(o)
		ender := func() engine.Ender {
			if n := l.run.Attempt(); n <= len(h.Get(mt.id).Attempts) {
				return h.Get(mt.id).Attempts[n-1].EndedBy
			}
			return engine.EndedByUnknown
		}
		var states []engine.Event
		stale, released := 0, 0
		for _, ev := range sync() {
			if ev.TaskID != mt.id {
				continue
			}
			switch ev.Type {
			case engine.EventState:
				states = append(states, ev)
			case engine.EventStale:
				stale++
			case engine.EventReleased:
				released++
			}
		}
		switch {
		case current:
			if len(states) == 0 || states[0].From != engine.StateRunning || stale+released > 0 {
				m.fail("%s: its worker ended lease %d under way, but the events were %d state (%v), %d stale, %d released", mt.id, l.run.LeaseID(), len(states), states, stale, released)
			}
			var want engine.State
			switch {
			case o.Release:
				want = engine.StateQueued
			case o.Err == nil:
				want = engine.StateSucceeded
			case o.Final:
				want = engine.StateFailed
			}
			if want != 0 && states[0].To != want {
				m.fail("%s: its worker ended its lease with %+v, but it went %s", mt.id, o, states[0].To)
			}
			if o.Release && !mt.deadline.IsZero() && !h.Clock.Now().Before(mt.deadline) && (len(states) != 2 || states[1].To != engine.StateExpired) {
				m.fail("%s: handed back past its deadline, it went %v, not QUEUED then EXPIRED", mt.id, states)
			}
			if by := ender(); by != engine.EndedByWorker {
				m.fail("%s: its worker ended lease %d (%+v), but attempt %d records %q as its ender", mt.id, l.run.LeaseID(), o, l.run.Attempt(), by)
			}
		case cancelled:
			if len(states) > 0 || released != 1 {
				m.fail("%s: its worker returned the lease of the cancelled task, but the events were %d state, %d released", mt.id, len(states), released)
			}
			if by := ender(); by != engine.EndedByEngine {
				m.fail("%s: its attempt %d ended in a cancellation, but records %q as its ender", mt.id, l.run.Attempt(), by)
			}
		default:
			if len(states) > 0 || released > 0 || stale > 1 {
				m.fail("%s: a superseded lease (%d, of attempt %d) ended it: %d state, %d released, %d stale", mt.id, l.run.LeaseID(), l.run.Attempt(), len(states), released, stale)
			}
		}
	}
	logf := func(format string, args ...any) {
		if *modelTrace {
			t.Logf(format, args...)
		}
	}
	// emptyLane ends everything of the lane named l, as an operator does
	// before changing its kind: it cancels what has not ended, and the
	// attempts that still hold slots return (the workers their leases, the
	// executor its attempts).
	emptyLane := func(l string) {
		t.Helper()
		_, err := h.CancelWhere(ctx, engine.TaskFilter{Lane: l}, "emptied for a switch")
		require.NoError(t, err)
		sync()
		for _, ls := range slices.Clone(leases) {
			if mt := ls.task; mt.lane == l && ls.gen == mt.leases && mt.holding {
				finish(ls, engine.Outcome{Result: []byte(`{}`)})
			}
		}
		for _, id := range h.Exec.Running() {
			if mt := m.tasks[id]; mt != nil && mt.lane == l {
				_ = h.Exec.Succeed(id, `{}`)
			}
		}
		sync()
	}
	// switchLane makes the lane named l a pull lane or a pushed one: the
	// other kind when flip is set, else the kind it is (no change, which
	// is always allowed). A change is made only when nothing of the lane
	// is live.
	switchLane := func(l string, flip bool) {
		t.Helper()
		pull := m.pullLanes[l] != flip
		live := 0
		for _, mt := range m.tasks {
			if mt.lane == l && (!mt.state.Terminal() || mt.holding) {
				live++
			}
		}
		_, err := h.UpdateLane(ctx, l, engine.LaneUpdate{Pull: &pull})
		switch {
		case flip && live > 0 && !engine.IsCode(err, engine.CodeConflict):
			m.fail("lane %s changed kind (pull %v) with %d tasks that have not ended or hold a slot: %v", l, pull, live, err)
		case (!flip || live == 0) && err != nil:
			m.fail("lane %s refused pull=%v (a change: %v) with nothing live: %v", l, pull, flip, err)
		}
		if err == nil {
			m.pullLanes[l] = pull
			if pull {
				pullSet.Store(l, true)
			} else {
				pullSet.Delete(l)
			}
		}
		sync()
		if ph, held := h.PullHold(l); held && !m.pullLanes[l] {
			m.fail("lane %s is pushed, but it has a pull lane's hold: %+v", l, ph)
		}
	}
	// restart stops the engine, by Shutdown or by a crash (from then on
	// nothing it writes reaches the store), and starts a new one on the
	// same store, as a server starts: its instances registered again and
	// its fairness policy set again. The model checks what the stop and the
	// recovery did to the attempts under way, then goes on from there.
	restart := func(graceful bool) {
		t.Helper()
		if !durable {
			graceful = true // a store that keeps nothing across processes is not restarted on after a crash
		}
		sync()
		var pushed, leased []*mTask
		for _, mt := range m.tasks {
			switch {
			case mt.pull && mt.state == engine.StateRunning && mt.holding:
				leased = append(leased, mt)
			case !mt.pull && mt.state.InFlight():
				pushed = append(pushed, mt)
			}
		}
		logf("restart: graceful %v, durable %v, %d pushed attempts and %d leases under way", graceful, durable, len(pushed), len(leased))
		old, oldStore := h.Engine, store
		if !graceful {
			oldStore.crashed.Store(true)
		}
		stop, cancel := context.WithCancel(ctx)
		cancel()
		require.NoError(t, old.Shutdown(stop))
		oldStore.crashed.Store(true) // a call to the stopped engine writes nothing either
		if graceful {
			readEvents(old.Events())
			for _, mt := range pushed {
				if mt.state != engine.StateCancelled || mt.reason != "shutdown" {
					m.fail("%s: its pushed attempt was under way at Shutdown, which left it %s (%q), not CANCELLED (shutdown)", mt.id, mt.state, mt.reason)
				}
			}
			for _, mt := range m.tasks {
				switch {
				case !durable && !mt.state.Terminal():
					m.fail("%s: on a store that is not durable, Shutdown left it %s", mt.id, mt.state)
				case durable && slices.Contains(leased, mt) && mt.state != engine.StateRunning:
					m.fail("%s: Shutdown ended its lease (%s, %q), which the next start resumes", mt.id, mt.state, mt.reason)
				}
			}
		}
		// The old engine's slots are gone with it, but for the attempts the
		// new engine takes over: the pushed ones under way (they end as
		// interrupted) and the leases it resumes. Its holds are gone too.
		for _, mt := range m.tasks {
			mt.announced = false
			if mt.holding && !mt.state.InFlight() {
				mt.holding, mt.timedOut = false, false
			}
		}
		h.Exec = enginetest.NewExecutor()
		m.starts = 0
		m.restarting = true
		startEngine()
		evs := readEvents(h.Events())
		for _, mt := range pushed {
			if graceful {
				continue
			}
			var got *engine.Event
			for i := range evs {
				if evs[i].TaskID == mt.id && evs[i].Type == engine.EventState {
					got = &evs[i]
					break
				}
			}
			if got == nil || !got.From.InFlight() || !strings.Contains(got.Reason, "interrupted: the server stopped while it ran") {
				m.fail("%s: its pushed attempt was under way at the crash, but the new engine's first event of it is %+v, not its interruption", mt.id, got)
			}
		}
		for _, mt := range leased {
			switch {
			case !durable:
			case !mt.deadline.IsZero() && !h.Clock.Now().Before(mt.deadline):
				// Its deadline came before the restart (its lease was in
				// its grace): not resumed; its attempt counts as
				// interrupted, which fails the task for its deadline.
				if mt.resumed || mt.state != engine.StateFailed || !strings.HasPrefix(mt.reason, "deadline exceeded: interrupted") {
					m.fail("%s: leased at the restart past its deadline %v, the new engine left it %s (resumed %v, %q)", mt.id, mt.deadline, mt.state, mt.resumed, mt.reason)
				}
			case !mt.resumed || mt.state != engine.StateRunning || !mt.holding:
				m.fail("%s: leased at the restart, the new engine left it %s (resumed %v, holding %v, %q)", mt.id, mt.state, mt.resumed, mt.holding, mt.reason)
			}
		}
		// The workers take their leases back from the new engine: the same
		// lease ids and attempts, for the lane's timeout from now.
		leaseIDs = map[uint64]bool{}
		var kept []*mLease
		for _, run := range h.Leased("") {
			mt, prev := m.tasks[run.TaskID()], newest[run.TaskID()]
			switch {
			case mt == nil || !mt.resumed:
				m.fail("the new engine has a lease of %s under way that it did not announce resumed", run.TaskID())
			case prev == nil || run.LeaseID() != prev.run.LeaseID() || run.Attempt() != prev.run.Attempt():
				m.fail("%s: resumed as lease %d of attempt %d, not as the lease its worker holds (%+v)", mt.id, run.LeaseID(), run.Attempt(), prev)
			}
			if dl, _ := run.Deadline(); !dl.Equal(mt.leaseUntil) {
				m.fail("%s: its resumed lease runs out at %v, not %v (the lane's timeout from the restart, capped by its deadline %v)", mt.id, dl, mt.leaseUntil, mt.deadline)
			}
			l := &mLease{run: run, task: mt, gen: prev.gen}
			newest[mt.id] = l
			kept = append(kept, l)
			leaseIDs[run.LeaseID()] = true
		}
		leases = kept
		for _, mt := range m.tasks {
			mt.resumed = false
		}
		m.restarting = false
		for _, id := range slices.Sorted(maps.Keys(instances)) {
			h.SetInstance(instances[id])
		}
		if policyName != "" {
			setPolicy(policyName, policyImpl)
			m.holdOK = false
		}
		if greedy != nil {
			require.NoError(t, h.SetRetry("", "greedy", *greedy))
		}
		sync()
	}
	steps := 20 + r.IntN(60)
	for step := 0; step < steps; step++ {
		op := r.IntN(28)
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
			id := pick(submitted)
			if l := someLease(); l != nil && r.IntN(2) == 0 {
				id = l.task.id // a task a worker holds (or held) a lease of
			}
			_, _ = h.Cancel(ctx, id, "model cancel")
		case op < 15:
			_, err := h.CancelWhere(ctx, engine.TaskFilter{AgentID: agents[r.IntN(3)], Lane: lanes[r.IntN(len(lanes))]}, "model filter")
			require.NoError(t, err)
		case op < 16:
			_, err := h.StopSession(ctx, sessions[2+r.IntN(2)], r.IntN(2) == 0)
			require.NoError(t, err)
		case op < 17:
			if r.IntN(2) == 0 { // debounce on (up to 2 s) or off
				d := time.Duration(r.IntN(3)) * time.Second
				_, err := h.UpdateLane(ctx, lanes[r.IntN(len(lanes))], engine.LaneUpdate{Debounce: &d})
				require.NoError(t, err)
				break
			}
			p := r.IntN(3) == 0
			_, err := h.UpdateLane(ctx, lanes[r.IntN(len(lanes))], engine.LaneUpdate{Paused: &p})
			require.NoError(t, err)
		case op < 18:
			l := lanes[r.IntN(len(lanes))]
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
		case op < 20: // instances come and go
			id := fmt.Sprintf("i%d", r.IntN(3))
			if r.IntN(4) == 0 {
				h.RemoveInstance(id)
				m.instMax[id] = -1
				delete(instances, id)
			} else {
				c := 1 + r.IntN(3)
				info := engine.InstanceInfo{ID: id, Capacity: c, Healthy: r.IntN(5) > 0}
				h.SetInstance(info)
				m.instMax[id] = c
				instances[id] = info
			}
		case op < 22: // a worker leases from a pull lane (now and then from a lane that is not one)
			lane := lanes[r.IntN(len(lanes))]
			if r.IntN(5) > 0 {
				var pull []string
				for _, l := range lanes {
					if m.pullLanes[l] {
						pull = append(pull, l)
					}
				}
				if len(pull) > 0 {
					lane = pull[r.IntN(len(pull))]
				}
			}
			lease(lane, 1+r.IntN(4), time.Duration(1+r.IntN(60))*time.Second, fmt.Sprintf("w%d", r.IntN(3)))
		case op < 24: // a worker ends a lease it was given
			l := someLease()
			if l == nil {
				continue
			}
			var o engine.Outcome
			switch r.IntN(6) {
			case 0, 1:
				o = engine.Outcome{Result: []byte(`{}`)}
			case 2:
				// A worker may give a code the engine gives too: the
				// attempt records it as the worker's all the same.
				o = engine.Outcome{Err: engine.Transient(errors.New("transient")), Code: []string{"", engine.CodeTimeout, engine.CodeLeaseExpired}[r.IntN(3)]}
			case 3:
				o = engine.Outcome{Err: engine.Permanent(errors.New("permanent"))}
			case 4:
				o = engine.Outcome{Release: true, Err: errors.New("worker stopping")}
			default:
				o = engine.Outcome{Err: errors.New("no retry can help"), Final: true}
			}
			finish(l, o)
			continue // finish synced
		case op < 25: // a worker renews a lease it was given
			l := someLease()
			if l == nil {
				continue
			}
			mt, now := l.task, h.Clock.Now()
			want := now.Add(time.Duration(1+r.IntN(60)) * time.Second)
			underWay := l.current() && now.Before(mt.leaseUntil)
			until, err := l.run.Extend(want)
			if !underWay {
				if !engine.IsCode(err, engine.CodeConflict) {
					m.fail("%s: lease %d (current %v, %s, ran out at %v, now %v) renewed: %v, %v", mt.id, l.run.LeaseID(), l.current(), mt.state, mt.leaseUntil, now, until, err)
				}
				break
			}
			require.NoError(t, err, "%s: renewing its lease under way", mt.id)
			if !mt.deadline.IsZero() && mt.deadline.Before(want) {
				want = mt.deadline
			}
			if !until.Equal(want) {
				m.fail("%s: renewed to %v, not %v (what was asked, capped by its deadline %v)", mt.id, until, want, mt.deadline)
			}
			mt.leaseUntil = until
		case op < 26: // a lane changes kind, maybe once emptied for it
			l := lanes[r.IntN(len(lanes))]
			if r.IntN(2) == 0 {
				emptyLane(l)
			}
			switchLane(l, r.IntN(5) > 0)
		case op < 27:
			restart(r.IntN(2) == 0)
		default: // the fairness policy: its hold, or another policy
			if r.IntN(4) > 0 {
				if !native {
					fair.set(r.IntN(2) == 0, int64(r.IntN(2))*500)
				}
				break
			}
			native = !native
			if native {
				setPolicy("fair-share", &fairshare.Fairness{})
			} else {
				fair = &modelFair{inline: r.IntN(2) == 0, pull: pullSet}
				setPolicy("model", fair)
			}
			sync()
			m.holdOK = false
			for _, mt := range m.tasks {
				if mt.announced {
					m.fail("%s: still announced held after a change of fairness policy", mt.id)
				}
			}
		}
		sync()
	}

	// Drain: open everything up and let all work finish.
	fair.set(false, 0)
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
		for _, l := range lanes {
			if m.pullLanes[l] {
				lease(l, 10, time.Minute, "drain")
			}
		}
		for _, l := range leases {
			if l.current() {
				finish(l, engine.Outcome{Result: []byte(`{}`)})
			}
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
		got := h.Get(mt.id)
		require.Equal(t, mt.state, got.State, "%s: the engine's state is not the model's", mt.id)
		require.Equal(t, mt.reason, got.Reason, "%s: the engine's reason is not its last state event's", mt.id)
		require.NotEmpty(t, got.Reason, "%s ended %s without a reason", mt.id, got.State)
	}
	for _, id := range submitted {
		require.Contains(t, m.tasks, id, "an accepted task has no events")
	}
	require.Zero(t, h.Stats(ctx).InFlight)
}
