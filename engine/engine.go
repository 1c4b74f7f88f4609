package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/internal/drive"
	"github.com/switchyard/switchyard/engine/policy"
)

// Options are the engine's collaborators.
type Options struct {
	Config   Config
	Store    Store    // required
	Executor Executor // required
	Clock    clock.Clock
	Logger   hclog.Logger
	// TabLocator, when set, tells the engine which instance owns a tab, so
	// that a task naming only a tab counts against that instance's capacity.
	TabLocator TabLocator
	// PlaceOnInstances says that the instances the engine learns through
	// its InstanceSink methods (from the executor's instance registry) are
	// all there is: a task that cannot be placed on one of them — no
	// healthy instance of its kind with room, or the instance it names is
	// not registered — waits in its queue (QUEUED, parked as "no healthy
	// instance with room"; its deadline still applies) until one can take
	// it, and no attempt is made meanwhile. Without it (an engine with no
	// registry, as in tests) such a task is dispatched with no placement and
	// the executor decides. A chat task when no chat instance is registered
	// at all is still dispatched: the executor fails it with a clear reason.
	PlaceOnInstances bool
	// Seed seeds task id generation; 0 draws a random seed.
	Seed uint64
	// Events, when set, is the event log to continue instead of a new one:
	// a node that changes role (standby, leader, standby again) keeps one
	// log, so its subscribers never notice. It is new (NewEventLog) or
	// was given to an engine over the same store before; the engine
	// catches it up from the store (see NewEventLog).
	Events *EventLog

	// synchronous drives the engine in its callers' goroutines: for the
	// engine's test harnesses only (engine/internal/drive,
	// enginetest.Synchronous).
	synchronous bool
}

func init() {
	drive.Synchronous = func(opts any) { opts.(*Options).synchronous = true }
}

// TabLocator tells which instance owns a tab. The executor's instance
// registry implements it.
type TabLocator interface {
	// InstanceOfTab returns the instance that owns tabID, or ok false when
	// the tab is unknown.
	InstanceOfTab(tabID string) (instanceID string, ok bool)
}

// Engine schedules tasks: it admits them into lanes and queues, decides what
// runs next under its policies, enforces every ceiling, hands attempts to the
// executor, and records every change as an event through its store.
//
// All methods are safe for concurrent use.
type Engine struct {
	// core is the decision state (core.go); its fields and methods are the
	// engine's own, promoted.
	core

	mu    sync.Mutex
	store Store
	exec  Executor
	log   hclog.Logger
	sync  bool

	armed clock.Timer
	// reask asks a fairness policy that held again when its hint elapses.
	reask   clock.Timer
	armedAt int64

	events *EventLog
	// interruption is why the attempts Start finds under way ended
	// (StartTakingOver sets it; default interruptedStopped).
	interruption string
	// opened is the store's state Open loaded, which Start recovers from;
	// nil before Open and once Start has taken it.
	opened *Snapshot

	// dispatch and commit
	dispatching     bool
	dispatchPending bool
	durable         bool // opts.Store.Durable(), asked once: attempts start only once committed
	kickCh          chan struct{}
	commitCh        chan struct{}
	lazyCh          chan struct{} // changes nobody waits for (durable): they may ride in the next commit
	runningCh       chan struct{} // attempts that started (durable): they wait longer for company (runningCommitDelay)
	startCh         chan []*Run   // committed attempts, for the starter goroutine (durable, asynchronous)
	committed       atomic.Uint64
	commitMu        sync.Mutex      // one commit at a time
	spares          [2]spareBuffers // alternate between batches (commit.go)
	spareNext       int
	pipe            PipelinedStore // the store, when it pipelines commits (asynchronous engines only)
	baseCtx         context.Context
	stop            context.CancelFunc
	wg              sync.WaitGroup
	running         bool
	housekeeper     clock.Timer
	purged          atomic.Uint64
	standby         bool        // a follower: no scheduling (cluster.go)
	abandoned       atomic.Bool // lost leadership: commits are dropped
	fenced          atomic.Bool // the store refused a commit: another node leads

	pending      *pendingBatch // the changes the core records now (core.cur) and their completion (guarded by mu)
	committing   *pendingBatch // the latest batch in the store's hands (guarded by mu)
	commitHealth commitHealth  // failing commits, for readiness (commit.go)
}

// named is a policy that fills a slot a lane may set for itself, with its
// name.
type named[P any] struct {
	name   string
	p      P
	own    bool // set for this lane, not inherited
	inline bool // p decides under the engine lock (inline)
	// gen tells this assignment from every other, under the same name or
	// not (policyGens): an answer given outside the lock is the lane's
	// policy's only if the lane still has this assignment (retryAhead).
	gen uint64
}

// policyGens numbers policy assignments, across every engine and core of
// the process, so that no two ever share a generation.
var policyGens atomic.Uint64

type (
	namedSelection = named[policy.Selection]
	namedRetry     = named[policy.Retry]
)

type namedFairness struct {
	name      string
	p         policy.Fairness
	stateless bool // p keeps no state between decisions (policy.StateReporter)
	inline    bool
	details   bool // p may read the candidates' details (policy.UsesDetails)
}

// changes are what the core's operations recorded since the driver last
// took them: events, the tasks whose rows changed, snapshots of tasks no
// longer in memory, batches, lanes and settings. The core only appends to
// them; the driver takes them whole (swapPending), writes them as one
// batch, publishes the events once committed and reuses the buffers.
type changes struct {
	events   []Event
	snaps    []*Task // snapshots of tasks no longer in memory (webhook records)
	batches  []BatchInfo
	tasks    []*task
	lanes    []LaneConfig
	settings []Setting
	// batch is the driver's batch these changes are (nil for a core
	// without a driver), so that it can answer an operation's waiters from
	// the changes it recorded into (core.span).
	batch *pendingBatch
	// followedEnd is set when the changes hold the end of a task a client
	// follows (Engine.Follow): the driver asks for their commit at once
	// rather than lazily, whatever ended the task.
	followedEnd bool
	// quiet is set when the changes hold a change of a task that no event
	// records (core.markQuiet), or — once swapped out for a commit — when
	// the batch still in the store's hands before them did: a task's
	// lastSeq then does not tell whether what it shows is committed
	// (Engine.CommittedTask).
	quiet bool
}

func (c *changes) empty() bool {
	return len(c.events) == 0 && len(c.tasks) == 0 && len(c.snaps) == 0 && len(c.batches) == 0 && len(c.lanes) == 0 &&
		len(c.settings) == 0
}

// pendingBatch is the driver's side of a set of changes: the attempts to
// start once they are written, and the batch's completion, which callers
// that wait for the commit wait on.
type pendingBatch struct {
	changes
	runs []*Run // attempts to start once this batch is written (durable, asynchronous)
	done chan struct{}
	err  error
}

// startBacklog is how many committed batches of attempts may wait for the
// starter goroutine before the committer waits for it.
const startBacklog = 16

func newPendingBatch(events, tasks int) *pendingBatch {
	return &pendingBatch{done: make(chan struct{}), changes: changes{events: make([]Event, 0, events), tasks: make([]*task, 0, tasks)}}
}

// setPending makes b the batch the core records into (the lock is held, or
// the engine is not started).
func (e *Engine) setPending(b *pendingBatch) {
	b.batch = b
	e.pending = b
	e.cur = &b.changes
}

// commitWait is what the caller of an operation waits for to learn that
// what it recorded is committed: the batch that holds it (latest) and any
// earlier batch that holds part of it — when a policy decided outside the
// lock during the operation and the committer swapped the pending batch out
// meanwhile. Batches end in seq order, so waiting for latest waits for
// them all; the change is committed only if every one of them is.
type commitWait struct {
	latest  *pendingBatch
	earlier []*pendingBatch
}

// none reports whether there is nothing to wait for.
func (w commitWait) none() bool { return w.latest == nil }

// err is the first error of w's batches, once they have ended.
func (w commitWait) err() error {
	for _, b := range w.earlier {
		if b.err != nil {
			return b.err
		}
	}
	return w.latest.err
}

// New creates an engine. Call Start to load the store's state and begin
// dispatching.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: a store is required")
	}
	if opts.Executor == nil {
		return nil, errors.New("engine: an executor is required")
	}
	cfg := opts.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine config: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	e := &Engine{
		store: opts.Store, exec: opts.Executor,
		log: opts.Logger.Named("engine"), sync: opts.synchronous,
		kickCh: make(chan struct{}, 1), commitCh: make(chan struct{}, 1),
		lazyCh: make(chan struct{}, 1), runningCh: make(chan struct{}, 1), startCh: make(chan []*Run, startBacklog),
	}
	e.core.init(cfg, opts.Clock, opts.TabLocator, opts.PlaceOnInstances, opts.Seed)
	e.core.lock, e.core.owner = &e.mu, e
	e.setPending(newPendingBatch(64, 64))
	e.events = opts.Events
	e.durable = opts.Store.Durable()
	if ps, ok := opts.Store.(PipelinedStore); ok && !e.sync {
		e.pipe = ps
	}
	e.baseCtx, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// StartTakingOver is Start for the node of a cluster named node that takes
// over from the previous leader: the attempts under way are recorded as
// interrupted by the leader change, not by a stop of this server.
func (e *Engine) StartTakingOver(ctx context.Context, node string) error {
	e.setTakingOver(node)
	return e.Start(ctx)
}

// OpenTakingOver is Open for the node of a cluster named node that takes
// over from the previous leader (StartTakingOver).
func (e *Engine) OpenTakingOver(ctx context.Context, node string) error {
	e.setTakingOver(node)
	return e.Open(ctx)
}

func (e *Engine) setTakingOver(node string) {
	e.view(func(*core) { e.interruption = "interrupted: the leader changed (node " + node + " took over)" })
}

// Open loads what the store keeps besides the state of its tasks: the last
// event seq, the settings (the plugin manager's stored plugins and policy
// choices among them) and the lanes (those of the live tasks included). It
// decides nothing: no attempt that a stop interrupted is decided, no task
// dispatched, no lease granted, until Start. A server opens its engine,
// puts the stored policy choices back in force (plugins/manager's Start)
// and only then starts it, so that every decision after a restart or a
// takeover — the retry decisions of the interrupted attempts first — is
// made by the policies chosen before it. Open is optional: Start opens an
// engine that was not opened.
func (e *Engine) Open(ctx context.Context) error {
	snap, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("engine: load store: %w", err)
	}
	e.view(func(*core) { err = e.openLocked(ctx, snap) })
	return err
}

// openLocked is Open once the store is loaded.
func (e *Engine) openLocked(ctx context.Context, snap *Snapshot) error {
	if e.running || e.standby || e.opened != nil {
		return errors.New("engine: already opened")
	}
	if err := e.adoptSnapshotLocked(ctx, snap); err != nil {
		return err
	}
	if err := e.restoreLanesLocked(snap.Lanes, true); err != nil {
		return err
	}
	// A live task's lane that is no longer configured comes back with the
	// defaults, now, so that a policy choice stored for it applies too.
	// In the order of the tasks' submission: a lane's index, which
	// policies see, follows the order lanes are added in.
	tasks := slices.Clone(snap.Tasks)
	slices.SortFunc(tasks, func(a, b *Task) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, st := range tasks {
		if st.State.Terminal() || e.laneByName[st.Spec.Lane] != nil {
			continue
		}
		e.log.Warn("task's lane no longer configured; recreating it with defaults", "task", st.ID, "lane", st.Spec.Lane)
		lc := LaneConfig{Name: st.Spec.Lane, MaxInFlight: 30}
		if err := lc.validate(); err != nil {
			return fmt.Errorf("engine: lane of task %s: %w", st.ID, err)
		}
		e.addLane(lc)
	}
	e.opened = snap
	return nil
}

// Start recovers the tasks of the store's state (the attempts a previous
// stop interrupted are decided by their lanes' retry policies) and starts
// dispatching. It opens the engine first unless Open did. It must be
// called once, before any other method that changes state but those that
// set policies (which an opened engine takes before it decides anything).
func (e *Engine) Start(ctx context.Context) error {
	var opened bool
	e.view(func(*core) { opened = e.opened != nil })
	if !opened {
		if err := e.Open(ctx); err != nil {
			return err
		}
	}
	var (
		recErr   error
		restored []SessionBinding
	)
	_, err := e.apply(false, func(c *core) error {
		if e.running {
			return errors.New("engine: already started")
		}
		snap := e.opened
		if snap == nil {
			return errors.New("engine: not opened")
		}
		e.opened = nil
		e.running = true
		recErr = e.recoverLocked(ctx, snap)
		e.scheduleHousekeepingLocked()
		if _, ok := e.exec.(SessionAdopter); ok && recErr == nil {
			restored = c.restoredBindingsLocked()
		}
		return nil
	})
	if err == nil {
		err = recErr
	}
	if err != nil {
		return err
	}
	if len(restored) > 0 {
		e.exec.(SessionAdopter).AdoptSessions(restored)
	}
	if !e.sync {
		e.wg.Add(3)
		go e.dispatchLoop()
		go e.commitLoop()
		go e.startLoop()
	}
	e.kick()
	e.commitNow()
	return nil
}

// Config returns the engine's configuration as validated (defaults filled in).
func (e *Engine) Config() Config {
	var out Config
	e.view(func(c *core) { out = c.configLocked() })
	return out
}

// configLocked is Config on the core.
func (c *core) configLocked() Config {
	cfg := c.cfg
	cfg.Lanes = make([]LaneConfig, len(c.lanes))
	for i, l := range c.lanes {
		cfg.Lanes[i] = l.cfg
	}
	return cfg
}

// Events returns the log subscribers read from.
func (e *Engine) Events() *EventLog { return e.events }

// unlockTo publishes the changes made under the lock and releases it. With
// a durable store the commit it asks for is lazy, through lazyCh: e.lazyCh,
// where the changes may wait lazyCommitDelay for a commit that someone
// waits for (commitSoon), or e.runningCh for the start of attempts
// (runningCommitDelay) — unless the pending batch holds the end of a task a
// client follows (Follow), which is written at once, whether an attempt's
// end, a timer or a cascade ended it.
func (e *Engine) unlockTo(lazyCh chan struct{}) {
	e.processCascadesLocked()
	e.armLocked()
	e.armReaskLocked()
	signal, lazy := !e.cur.empty(), e.durable && !e.cur.followedEnd
	e.mu.Unlock()
	if signal && !e.sync {
		ch := e.commitCh
		if lazy {
			ch = lazyCh
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// mutate runs op on the core under the engine lock; then, unless op
// refused (returned an error, having changed nothing), it publishes what op
// recorded (cascades, timers, the committer's wake-up) and dispatches what
// it made possible. It is the protocol every operation that changes state
// follows; an operation that reads the store, or waits for a commit, does
// so around it.
func (e *Engine) mutate(op func(c *core) error) error {
	_, err := e.apply(true, op)
	return err
}

// apply is the mutation protocol (mutate) with the choice of dispatching
// afterwards (false for the dispatcher's own round, and for changes that
// free nothing: an attempt's start, a lease). It returns the batches that
// hold what op recorded — or, when op recorded nothing, the latest batch
// in the store's hands, which holds what op read — for a caller that waits
// for its commit; none when there is none. With a durable store, the commit
// it asks for lingers lazyCommitDelay (unlock).
//
// While op runs, a policy that is not inline may decide outside the lock
// (core.outside): the lock is released for the call and taken again, and
// the committer may swap the pending batch out meanwhile. Each batch op
// recorded into is noted under the lock hold that recorded into it
// (core.span), so that the caller waits for every one of them: an answer
// taken from whichever batch is pending at the end could report success
// for a change whose batch failed.
func (e *Engine) apply(dispatch bool, op func(c *core) error) (holds commitWait, err error) {
	return e.applyTo(dispatch, e.lazyCh, op)
}

// applyTo is apply, asking for a lazy commit through lazyCh (unlockTo).
func (e *Engine) applyTo(dispatch bool, lazyCh chan struct{}, op func(c *core) error) (holds commitWait, err error) {
	e.mu.Lock()
	e.span = opSpan{}
	if err := op(&e.core); err != nil {
		e.span = opSpan{}
		e.mu.Unlock()
		return commitWait{}, err
	}
	e.span.note(e.cur)
	if s := e.span; s.last == nil {
		holds.latest = e.committing
	} else {
		holds.latest = s.last.batch
		for _, c := range s.earlier {
			holds.earlier = append(holds.earlier, c.batch)
		}
	}
	e.span = opSpan{}
	// The caller claims the dispatcher's role in the same lock hold as its
	// change (kick would take the lock once more for it): two lock
	// acquisitions fewer per task, one for its submission, one for its end.
	claimed := dispatch && e.claimDispatchLocked()
	e.unlockTo(lazyCh)
	if claimed {
		e.dispatchClaimed(e.inlineBudget())
	}
	if dispatch && e.sync {
		e.commitNow()
	}
	return holds, nil
}

// view runs fn on the core under the engine lock, for an operation that
// only reads, or that changes only what nobody commits (the driver's own
// bookkeeping, a follower's state). With apply, it is the only place that
// takes the lock.
func (e *Engine) view(fn func(c *core)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(&e.core)
}

// commitSoon asks the committer to write what is pending now: a submitter
// waits for it, or attempts wait to start.
func (e *Engine) commitSoon() {
	select {
	case e.commitCh <- struct{}{}:
	default:
	}
}

// lazyCommitDelay is how long the committer holds changes nobody waits for
// (an attempt's end, a cancellation, a timer's work) before writing them on
// their own. Under load a commit someone waits for comes sooner and takes
// them along; a lone submitter's next submission usually does, which saves
// its commit (and the wait behind it) a transaction of its own.
const lazyCommitDelay = 2 * time.Millisecond

// runningCommitDelay is how long the committer holds an attempt's start
// (RUNNING) when nothing else asks for a commit. Most attempts of a browser
// action end within a few milliseconds; the start then rides in the commit
// of the end, and the two cost one transaction. Written after
// lazyCommitDelay instead, it was a transaction of its own, and when the
// attempt ended while it was being written, the end — which a follower
// waits for (Follow) — waited for it first: on SQLite, a commit more on the
// way to the follower for every attempt a little longer than 2 ms, which is
// where a forwarded action's tail was. Another change's commit takes the
// start along at once.
const runningCommitDelay = 20 * time.Millisecond

// after runs after every public operation that changed state: it dispatches
// (and, when synchronous, commits) what the change made possible.
func (e *Engine) after() {
	e.kick()
	if e.sync {
		e.commitNow()
	}
}

// inlineRounds bounds the rounds of dispatch a caller runs in its own
// goroutine before it hands the rest to the dispatcher goroutine: enough for
// its own submission and the completions it set off, never so many that one
// API call dispatches a whole backlog.
const inlineRounds = 4

// kick makes the dispatcher run: the caller dispatches itself unless
// another goroutine is dispatching already — which then runs one more round
// for it — so there is no goroutine handoff between a submission and its
// dispatch. An asynchronous engine's caller runs inlineRounds at most, then
// wakes the dispatcher goroutine for the rest. No round waits for the disk:
// with a durable store the round's attempts join the pending batch, and the
// starter goroutine starts them once the committer has written it.
func (e *Engine) kick() {
	e.dispatchHere(e.inlineBudget())
}

// inlineBudget is how many rounds a caller dispatches in its own goroutine
// (kick): inlineRounds, or all of them (0) when the engine is synchronous.
func (e *Engine) inlineBudget() int {
	if e.sync {
		return 0
	}
	return inlineRounds
}

// wake wakes the dispatcher goroutine.
func (e *Engine) wake() {
	select {
	case e.kickCh <- struct{}{}:
	default:
	}
}

// dispatchHere dispatches in the calling goroutine until no round is
// pending, unless another goroutine is dispatching (it then runs one more
// round). One goroutine dispatches at a time. With a budget (> 0) it runs at
// most that many rounds and leaves what remains to the dispatcher goroutine.
func (e *Engine) dispatchHere(budget int) {
	claimed := false
	e.view(func(*core) { claimed = e.claimDispatchLocked() })
	if claimed {
		e.dispatchClaimed(budget)
	}
}

// claimDispatchLocked makes the caller the dispatcher and reports true,
// unless another goroutine is dispatching — which is then asked for one more
// round — or the engine is not running, or no round could dispatch anything:
// no task is in a queue (core.enqueued) and none is about to be (a cascade,
// processed as the lock is released, may queue dependents). Then nothing is
// asked: whatever puts a task into a queue later asks for its round itself
// — a submission, a timer, a cascade, and the submission whose tasks a
// policy ranked outside the lock, once it has applied their ranks. An
// attempt's end with nothing queued (most of them, when dispatch keeps up)
// so costs no round of its own, nor one more of the dispatcher's.
func (e *Engine) claimDispatchLocked() bool {
	if e.enqueued == 0 && len(e.cascade) == 0 {
		return false
	}
	if e.dispatching || !e.running {
		e.dispatchPending = e.running
		return false
	}
	e.dispatching = true
	return true
}

// dispatchClaimed is dispatchHere once the caller has claimed the
// dispatcher's role (claimDispatchLocked): it runs rounds until none is
// pending, or budget rounds (> 0) and leaves the rest to the dispatcher
// goroutine, and gives the role up.
func (e *Engine) dispatchClaimed(budget int) {
	rounds := 0
	for {
		more := true
		for more && (budget == 0 || rounds < budget) {
			more = e.dispatchRound() && !e.sync
			rounds++
		}
		done, handoff := false, false
		e.view(func(*core) {
			if !more && !e.dispatchPending {
				e.dispatching, done = false, true
				return
			}
			e.dispatchPending = false
			if budget > 0 && rounds >= budget {
				e.dispatching, handoff = false, true
			}
		})
		if handoff {
			e.wake()
		}
		if done || handoff {
			return
		}
	}
}

func (e *Engine) dispatchLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.kickCh:
		case <-e.baseCtx.Done():
			return
		}
		e.dispatchHere(0)
	}
}

// startLoop starts the attempts of each committed batch, in commit order
// (durable, asynchronous engines): the dispatcher goes on deciding while the
// committer writes, and no attempt starts before it is on disk.
func (e *Engine) startLoop() {
	defer e.wg.Done()
	for {
		select {
		case runs := <-e.startCh:
			if e.baseCtx.Err() != nil || e.abandoned.Load() {
				continue // stopped or deposed meanwhile: recovery counts them as interrupted
			}
			for _, r := range runs {
				e.exec.Start(r, r)
			}
		case <-e.baseCtx.Done():
			return
		}
	}
}

func (e *Engine) commitLoop() {
	defer e.wg.Done()
	linger := time.NewTimer(lazyCommitDelay)
	linger.Stop()
	for {
		var delay time.Duration
		select {
		case <-e.commitCh:
		case <-e.lazyCh:
			delay = lazyCommitDelay
		case <-e.runningCh:
			delay = runningCommitDelay
		case <-e.baseCtx.Done():
			e.commitNow() // a last flush
			return
		}
		if delay > 0 {
			e.linger(linger, delay)
		}
		// The changes signalled so far are all in the pending batch, which
		// this commit writes: a signal left over would start a linger for
		// changes not made yet, and write the next ones early (an
		// attempt's start, made just after its submission's commit, was
		// written on its own lazyCommitDelay after that commit), or wake
		// the committer again for nothing. A task's end signals twice —
		// its own change, then the dispatch round that ran after it, while
		// the end is still pending — and the second signal woke the
		// committer right after the end's commit, on the follower's way,
		// to find nothing to write.
		for _, ch := range [...]chan struct{}{e.lazyCh, e.runningCh, e.commitCh} {
			select {
			case <-ch:
			default:
			}
		}
		if !e.commitNow() {
			e.stats.idleCommits.Add(1)
		}
	}
}

// linger waits up to delay for a commit someone waits for, or less when a
// change that lingers less arrives meanwhile.
func (e *Engine) linger(t *time.Timer, delay time.Duration) {
	due := time.Now().Add(delay)
	t.Reset(delay)
	defer t.Stop()
	for {
		select {
		case <-e.commitCh:
			return
		case <-t.C:
			return
		case <-e.baseCtx.Done():
			return
		case <-e.runningCh: // it lingers as long or longer: the commit ahead takes it along
		case <-e.lazyCh:
			if d := time.Until(due); d > lazyCommitDelay {
				due = time.Now().Add(lazyCommitDelay)
				t.Reset(lazyCommitDelay)
			}
		}
	}
}

// Drain stops admitting new work: submissions fail with DRAINING. Running and
// queued tasks carry on.
func (e *Engine) Drain(_ context.Context) {
	_ = e.mutate(func(c *core) error {
		if !c.draining {
			c.draining = true
			c.emitEngineLocked("draining: new work is refused")
		}
		return nil
	})
}

// Draining reports whether the engine refuses new work.
func (e *Engine) Draining(_ context.Context) bool {
	var draining bool
	e.view(func(c *core) { draining = c.draining })
	return draining
}

// Quiesce drains the engine, dispatches nothing more (its lanes are paused
// in memory, not in the store) and waits until no attempt is in flight —
// but those whose leases a pull lane's worker keeps across a stop — or
// until ctx ends. The engine goes on answering: what it is asked meanwhile
// is refused if it is new work (DRAINING) and applied otherwise. Shutdown
// begins with it; a cluster's leader quiesces while it still leads.
func (e *Engine) Quiesce(ctx context.Context) {
	e.Drain(ctx)
	_, _ = e.apply(false, func(c *core) error {
		for _, l := range c.lanes { // dispatch nothing more
			l.cfg.Paused = true
		}
		return nil
	})
	for {
		var n int
		e.view(func(c *core) { n = c.inflight - e.keptLeasesLocked() })
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Shutdown drains the engine, lets running tasks finish until ctx ends, then
// cancels the rest with reason "shutdown". With a store that is not durable,
// queued tasks are cancelled too; with a durable one they stay queued for the
// next start. Everything is committed before Shutdown returns.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.Quiesce(ctx)
	_, _ = e.apply(false, func(c *core) error {
		var victims []*task
		for _, t := range c.tasks {
			if t.state.InFlight() && !e.keepsLeaseLocked(t) || !e.durable && !t.state.Terminal() {
				victims = append(victims, t)
			}
		}
		sort.Slice(victims, func(i, j int) bool { return victims[i].seq < victims[j].seq })
		now := c.now()
		for _, t := range victims {
			running := t.run != nil && t.state.InFlight()
			c.cancelLocked(t, "shutdown")
			if running {
				// The engine stops without waiting for its executor any
				// longer: the attempt ends here, the engine's end, so that
				// the last commit records it ended (an executor that
				// answers before the engine stops records its own time).
				att := t.lastAttempt()
				att.EndedAt, att.EndedBy = now, EndedByEngine
				att.Class, att.Error = classCancelled, "cancelled: shutdown"
			}
		}
		c.closed = true
		if e.armed != nil {
			e.armed.Stop()
			e.armed = nil
		}
		if e.housekeeper != nil {
			e.housekeeper.Stop()
		}
		return nil
	})
	e.stop()
	e.wg.Wait()
	e.commitNow()
	return nil
}
