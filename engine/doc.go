// Package engine is Switchyard's scheduler: it admits browser tasks into lanes
// and queues, decides what runs next, enforces every concurrency ceiling,
// hands attempts to an executor, and records every change as an event. It
// knows nothing of HTTP, GraphQL or WebAssembly; it talks to the world
// through small interfaces it owns — Store, Executor, clock.Clock, and one
// interface per policy slot (engine/policy) — and everything it decides is
// deterministic given its clock and its inputs.
//
// # Pipeline
//
//	Submit ─▶ admission ─▶ lane ─▶ (lane, agent) queue ─▶ dispatch ─▶ Executor.Start
//	           │ caps,       │ ceiling,  │ selection policy   │ fairness policy,  │
//	           │ drop policy │ pause     │ ranks tasks        │ every ceiling     │ Run.Started
//	           ▼             ▼           ▼                    ▼                   ▼ Run.Finish
//	        REJECTED      (paused)    QUEUED / WAITING     ASSIGNED ──▶ RUNNING ──▶ retry policy
//	                                                                               │
//	          Store.Commit ◀── events (seq) ◀── every transition                    ▼
//	               │                                                  SUCCEEDED / RETRY_WAIT /
//	               └─▶ EventLog ─▶ subscribers                        PARKED / FAILED
//
// # Tasks and their states
//
// A task is a spec (TaskSpec: who, where, what) and a record of what
// happened to it (Task). Its state moves like this; every move is an Event
// with a reason and a sequence number, and a terminal state never changes:
//
//	QUEUED ─▶ ASSIGNED ─▶ RUNNING ─▶ SUCCEEDED
//	  │  ▲        │          ├─▶ RETRY_WAIT ─▶ QUEUED      (failed attempt, budget left: backoff)
//	  │  │        │          ├─▶ PARKED      ─(reset)▶ QUEUED  (budget spent: fail closed)
//	  │  │        │          └─▶ FAILED                     (permanent error, deadline)
//	  │  └──(deps met)── WAITING                            (unmet dependencies)
//	  ├─▶ CANCELLED (from any state that is not terminal)
//	  ├─▶ REJECTED  (refused at admission, recorded with its reason)
//	  └─▶ EXPIRED   (the deadline passed while it waited)
//
// # Admission
//
// A submission is validated (a typed *Error with the field at fault), then
// checked against the queue caps of its session, agent, lane and the whole
// engine. When a cap is reached the lane's drop policy decides: "reject"
// records the task REJECTED and answers QUEUE_FULL with the counts;
// "drop-oldest" cancels the oldest queued task of the full scope ("dropped:
// queue full") and admits the new one. Nothing is dropped silently. A task
// whose dependencies have not all succeeded waits (WAITING); one whose
// dependency already failed is cancelled; unknown dependencies and cycles are
// refused. Draining refuses new work (DRAINING).
//
// # Queues, fairness and ceilings
//
// Each (lane, agent) queue is ordered by the selection policy's rank, then
// by submission order (an interrupting task goes first). Inside it, tasks of
// one session form a sub-queue, so that a session's tasks run one at a time
// and in order while the agent's other sessions proceed. When slots are
// free, the fairness policy chooses among the eligible queue heads; the
// built-in one takes a head that has waited past the aging threshold, else
// the agent with the smallest share of work in flight (in flight ÷ weight),
// then the larger weight, then the oldest head. Every ordering is total, so
// no decision depends on map order or heap layout.
//
// Ceilings are hard: global, per lane, per agent, per session, per batch and
// per instance. The engine checks them itself for every dispatch, whatever a
// policy answers. A cancelled attempt keeps its slots until its executor
// returns (or its lease runs out), so a ceiling is never exceeded while work
// winds down. A queue whose head is blocked by a full ceiling is parked on
// it; freeing a slot wakes every queue parked on that ceiling.
//
// Dispatch is event-driven — a submission, a completion, a timer or an
// operator's change starts a round of dispatch — never polled, and only
// when a round may find work: a change after which no task is in a queue
// starts none. The goroutine that made the change dispatches at once (one
// at a time; a change made meanwhile gets one more round; a backlog goes
// to a dispatcher goroutine), so a submission reaches its dispatch without
// a goroutine handoff. No round waits for the disk: with a store that is not durable the
// attempts start at once; with a durable one they join the pending batch,
// and a starter goroutine starts them once the committer has written it. A
// task submitted while dispatch keeps up is so written once, already
// assigned.
//
// # Where policies decide
//
// The built-in policies (and any policy.Inline) decide under the engine's
// lock. Any other policy — a WebAssembly plugin — decides outside it, on a
// snapshot, and its answer is applied only if it still fits: a submission's
// tasks are admitted but join their queues only once ranked, a fairness
// policy's picks are checked against every ceiling as they are applied, and
// a retry decision is applied if the attempt it was made for, and the
// details it was given, are unchanged; otherwise it is made again under the
// lock (decide.go). A slow decision so delays only the work that asked for it,
// never another lane's.
//
// # Attempts, leases and retries
//
// A dispatched task holds a lease for its attempt: the executor's context
// carries the deadline (the attempt timeout, or the task's deadline if
// earlier) and is cancelled when it passes; if the executor has not returned
// by timeout + grace, the lease expires, the attempt counts as failed ("lease
// expired") and the slots are reclaimed. A completion under a reclaimed lease
// is ignored and recorded. Failed attempts go to the lane's retry policy:
// transient failures back off (1 s × 2 up to 60 s by default) until the budget
// (4 attempts) is spent, then the task is PARKED until an operator resets it,
// or FAILED when its lane or itself says so (LaneConfig.Exhausted); permanent
// failures fail at once. A parked task is settled like a terminal one
// (State.Settled): its dependents are cancelled, its batch counts it as
// ended, and its webhook announces it. A reset runs it again alone.
//
// # Deadlines
//
// A task's deadline (TaskSpec.Deadline) holds by construction, not by its
// timer alone: no attempt starts at or after it. Every pick (admitHeadLocked:
// a round of dispatch, a worker's Pull, a plan) compares the head it takes
// with its deadline, and a head whose deadline has come expires there, even
// when the deadline's timer has not run yet; a task that enters QUEUED at or
// past its deadline — its backoff over, a lease handed back, its
// dependencies met, an operator's Reset or Retry, a restart — expires as it
// enters. Either way it ends as the timer ends it: EXPIRED, "deadline
// exceeded while queued". Backing off or parked past its deadline, a task
// FAILS ("deadline exceeded while retry_wait"); a restart ends what waited
// past its deadline during the downtime as the timers would have, and
// resumes no lease whose task's deadline has come. An attempt under way is
// cut at the deadline (its context's deadline), and one that fails at or
// past it is not retried (FAILED, "deadline exceeded: …").
//
// # Pull lanes
//
// A pull lane (LaneConfig.Pull) is never dispatched to the executor: its
// tasks wait until an external worker asks for them (Pull), which takes them
// in the fairness policy's order among the lane's queue heads (nothing while
// the policy holds them) under every ceiling and hands back their runs,
// RUNNING and committed. The run's deadline is the worker's lease (Run.Extend renews
// it); a lease that runs out is a timed-out attempt under the retry policy,
// and Outcome.Release hands a task back without spending an attempt. On a
// durable store such an attempt survives a restart (pull.go).
//
// # Durability
//
// Changes accumulate between commits and are written through the Store in
// one batch (group commit). With a durable store, Submit returns only after
// the task is committed; subscribers see events only once they are
// committed. Only what someone waits for (a submission, a setting, attempts
// about to start) is committed at once; the rest (an attempt's end, a
// cancel) waits for the commit in progress, if any, then up to 2 ms to ride
// in such a commit, so that a lone client pays for one transaction per
// submission, not two. A store that pipelines commits (PipelinedStore:
// PostgreSQL) is handed the next batch while the previous one is still
// being committed, once the next one has grown as large; batches are
// published, answered and their attempts started in seq order all the same.
// At start the engine rebuilds its state from the store: queued
// and waiting tasks return to their queues; attempts that were under way
// count as interrupted ("interrupted: the server stopped while it ran", or
// on a cluster's new leader "interrupted: the leader changed (node N took
// over)"; code restart), end at the last moment the store heard from the
// engine that ran them (its last event; when they really ended is not
// known), and follow the retry policy.
//
// # Core and driver
//
// The decision state — lanes, queues and their heaps, ceilings, tasks and
// their state machine, timers' heaps, policies — is a core (core.go) with no
// goroutines, channels or store. Its operations record what they changed
// (events, the tasks whose rows changed, batches, lanes, settings: its
// changes) and return the attempts to start (core.roundLocked, pullLocked);
// it never commits, publishes or starts anything itself. The Engine embeds
// it and drives it: it owns the lock, the committer, starter and dispatcher
// goroutines, the real timers and the durability modes, and applies what the
// core returns — swaps the changes out and commits them, publishes their
// events, starts the attempts (at once, or once committed with a durable
// store). Every operation that changes state goes through one wrapper
// (Engine.mutate, Engine.apply): the core's operation under the lock, then
// publication (cascades, timers, the committer's wake-up) and dispatch. A
// policy that is not inline decides inside such an operation but outside the
// lock (core.outside, decide.go). Plans run the core alone, under the lock,
// on scratch of their own (plan.go). Core exports the core to run with no
// driver at all (bare.go): its caller submits, runs rounds of dispatch and
// starts and ends their attempts, moves the clock and runs what is due, and
// takes the recorded events and task states; engine/simulate replays
// workloads that way.
//
// # Determinism
//
// An engine driven synchronously (enginetest.Synchronous, for the engine's
// tests only: engine/internal/drive) starts no goroutine: every call
// runs the core, dispatches and commits in the caller's goroutine before it
// returns. With a fake clock (engine/clock) and an executor that finishes
// attempts only when told (engine/enginetest), the engine is then fully
// deterministic: the same calls give the same decisions, ids and events. The
// package's model test checks thousands of random operation sequences that
// way against a reference model of the event stream. A Core on a fake clock
// is deterministic too, and decides as the synchronous engine does
// (TestABareCoreDecidesAsTheEngineDoes).
package engine
