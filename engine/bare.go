package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/policy"
)

// Core is the engine's decision core run on its own, without a driver: no
// goroutine, channel, lock, store or committer, and no timer of its own.
// Its caller is the driver. It submits tasks (Submit), runs rounds of
// dispatch (Dispatch) and starts the attempts they return itself; it ends
// them through the Runs (Run.Started, Run.Finish); it moves the clock it
// gave NewCore and runs what has fallen due (Next, RunDue); and it takes
// what the operations recorded — events and the changed tasks' states — as
// the Engine's committer would write it (Take). The decisions are the
// Engine's own: the same admission, queues, ceilings, policies, timers and
// state machine.
//
// Simulations replay workloads through it (engine/simulate). A Core is not
// safe for concurrent use: every call, including those on its Runs, comes
// from one goroutine, and none from inside a policy's decision. It knows
// no instances, tabs or pull lanes, and has no store: it keeps what it
// took of the tasks that ended (Take), so that a dependency, a parent or
// an idempotency key may name them, as the Engine's store lets it.
type Core struct {
	c core
	// ended holds the tasks that ended and that the core forgot (Take), by
	// id and by agentID\x00idempotency key: the bare core's stand-in for
	// the store admission reads.
	ended external
	// reaskAt is when a fairness policy that held asked to be asked again
	// (zero: not asked); a later hint waits for it, as the Engine's re-ask
	// timer does.
	reaskAt time.Time
}

// NewCore returns a core with cfg's lanes (validated, defaults filled in)
// and the built-in policies, nothing queued. It reads the time from clk
// (a clock.Fake, usually, that its caller moves); seed seeds task ids as
// Options.Seed does.
func NewCore(cfg Config, clk clock.Clock, seed uint64) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	if clk == nil {
		clk = clock.Real{}
	}
	k := &Core{ended: external{tasks: map[string]*Task{}, idem: map[string]*Task{}}}
	k.c.init(cfg, clk, nil, false, seed)
	k.c.owner = k
	return k, nil
}

// SetPolicy fills a policy slot (policy.SlotSelection, SlotRetry or
// SlotFairness) with p, named name: lane's own, or with lane "" the
// default every lane without its own follows (fairness is global: lane
// must be "").
func (k *Core) SetPolicy(slot policy.Slot, lane, name string, p any) error {
	return k.c.setPolicyLocked(slot, lane, name, p, false)
}

// Submit admits one task, as Engine.Submit does: it returns the task as
// recorded, along with a QUEUE_FULL error when it was recorded REJECTED,
// or an error alone when the spec is refused. Nothing is dispatched until
// Dispatch.
func (k *Core) Submit(spec TaskSpec) (*Task, error) {
	items := []BatchItem{{Spec: spec}}
	preps, order, keys := k.c.prepare(items, nil, k.c.now())
	res := k.c.admitLocked(context.Background(), items, nil, "", preps, order, keys, &k.ended)
	k.settle()
	return res.Items[0].Task, res.Items[0].Err
}

// Dispatch runs one round of dispatch at the clock's time and returns the
// attempts to start: as many as there are free slots under every ceiling
// and the fairness policy picks, 512 at most (a caller given 512 calls it
// again). The caller starts each (the Engine hands them to its executor)
// and ends it with Run.Finish; until then the attempt holds its slots.
// The Engine runs a round after every operation that may have freed a
// slot or queued a task: a submission, an attempt's end, RunDue.
func (k *Core) Dispatch() []*Run {
	runs := k.c.roundLocked(k.c.now(), nil)
	k.settle()
	return runs
}

// Next returns when the core next needs RunDue: the earliest retry,
// debounce, deadline, attempt timeout or lease expiry it holds, or a
// fairness policy's re-ask hint; false when nothing is scheduled.
func (k *Core) Next() (time.Time, bool) {
	var next int64
	for i := range k.c.timers {
		if t := k.c.timers[i].top(); t != nil && (next == 0 || t.timerAt[i] < next) {
			next = t.timerAt[i]
		}
	}
	if !k.reaskAt.IsZero() && (next == 0 || k.reaskAt.UnixNano() < next) {
		return k.reaskAt, true
	}
	if next == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, next), true
}

// RunDue handles what has fallen due by the clock's time, earliest first:
// backoffs and debounce windows elapsed (the task is queued), deadlines
// passed, attempts timed out and leases expired; a re-ask hint that has
// elapsed is spent. Dispatch then decides what this made possible.
func (k *Core) RunDue() {
	now := k.c.now()
	if !k.reaskAt.IsZero() && !k.reaskAt.After(now) {
		k.reaskAt = time.Time{}
	}
	k.c.timersDueLocked(now)
	k.settle()
}

// Take returns what the core's operations recorded since the last Take, as
// the Engine would commit it: the events (in seq order) and the states of
// the tasks they changed. The core then forgets the tasks that ended, as
// the Engine does once their end is committed, and keeps their states for
// admission to read, as the Engine's store keeps them.
func (k *Core) Take() *Batch {
	ch := k.c.cur
	k.c.cur = &changes{}
	out := &Batch{Events: ch.events, Batches: ch.batches, Lanes: ch.lanes, Settings: ch.settings,
		Tasks: make([]*Task, 0, len(ch.tasks)+len(ch.snaps))}
	for _, t := range ch.tasks {
		t.dirty = false
		out.Tasks = append(out.Tasks, t.snapshot())
	}
	out.Tasks = append(out.Tasks, ch.snaps...)
	for i, t := range ch.tasks {
		if !t.state.Terminal() {
			continue
		}
		if k.c.forgetLocked(t); k.c.tasks[t.id] != t {
			st := out.Tasks[i]
			k.ended.tasks[t.id] = st
			if key := t.spec.IdempotencyKey; key != "" {
				k.ended.idem[t.spec.AgentID+"\x00"+key] = st
			}
		}
	}
	return out
}

// Stats returns the core's counters, as Engine.Stats does (without the
// driver's commits and purges).
func (k *Core) Stats() Stats { return k.c.statsLocked() }

// settle is what the Engine does after every operation, less its own
// plumbing: it processes the cascades the operation set off and turns a
// re-ask hint into a due time (Next).
func (k *Core) settle() {
	k.c.processCascadesLocked()
	if h := k.c.reaskMs; h > 0 {
		k.c.reaskMs = 0
		if k.reaskAt.IsZero() {
			k.reaskAt = k.c.now().Add(time.Duration(h) * time.Millisecond)
		}
	}
}

// started is Run.Started for a bare core's runs.
func (k *Core) started(r *Run, instanceID, tabID string) {
	k.c.startedLocked(r, instanceID, tabID)
	k.settle()
}

// finish is Run.Finish for a bare core's runs.
func (k *Core) finish(r *Run, o Outcome) {
	ended := k.c.finishLocked(r, o)
	k.settle()
	if ended {
		r.cancel(context.Canceled, nil)
	}
}

// extend is Run.Extend for a bare core's runs.
func (k *Core) extend(r *Run, until time.Time) (time.Time, error) {
	return k.c.extendRunLocked(r, until)
}
