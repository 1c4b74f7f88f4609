// Package cluster runs a Switchyard node among several over one PostgreSQL
// store. Every node serves the whole API; one of them — elected through the
// store's lease — leads: it runs the engine's dispatcher and what acts on it
// (policy plugins, schedules, webhooks). The others follow:
//
//	follower                                      leader
//	─ reads: tasks, batches, events ─▶ store ◀─── the engine's commits
//	─ submissions, changes ─▶ commands ─NOTIFY──▶ applied by the engine, registry, plugins, schedules
//	◀─ answer ─────────────── commands ◀─NOTIFY── ┘
//	◀─ task events ─────── Follow (NOTIFY + poll) ◀─ committed events
//	◀─ instance, plugin events ─ broadcast ◀─────── the registry's, the plugin manager's
//
// A follower forwards nothing through itself: it writes to the database and
// wakes the leader (rpc.go). A submission carries the task ids the follower
// chose, so the leader admits it once however often it applies the command. Each node keeps one event log across its roles, so its
// subscribers see the same seq-ordered stream whoever leads. When the leader
// loses its lease (or the database) it stops before anyone else can take the
// lease — the store fences its commits by epoch, so a paused-then-resumed old
// leader cannot write — and another node takes over, reloads the queues and
// reclaims the old leader's attempts as interrupted. A node that takes the
// lease but cannot start leading (its engine or plugins fail to start) steps
// down: it gives the lease up at once, follows again, and campaigns again
// after a backoff that grows while its takeovers keep failing.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/failing"
	"github.com/switchyard/switchyard/internal/savedinstances"
	"github.com/switchyard/switchyard/internal/storeerr"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/pull"
	"github.com/switchyard/switchyard/schedule"
)

// Leadership is what runs on the leader beside its engine.
type Leadership struct {
	Plugins   *manager.Manager
	Schedules *schedule.Scheduler
	Pull      *pull.Manager // the pull lanes' leases; nil: none
	// Heartbeats is nil when the leader runs no heartbeat checks.
	Heartbeats *heartbeat.Checker
	// Stop stops them (before the engine stops or is abandoned).
	Stop func()
	// Release closes what the engine itself calls (its plugins), once the
	// engine has stopped or been abandoned, so that no decision runs in a
	// plugin as it closes. Nil: nothing to release.
	Release func()
}

// release runs l.Release, if any.
func (l *Leadership) release() {
	if l != nil && l.Release != nil {
		l.Release()
	}
}

// Options configure a node.
type Options struct {
	Node    string // unique per process
	Address string // where this node's API listens, for the nodes query
	Version string
	Store   *postgres.Store
	// NewEngine builds an engine over Store with the node's configuration and
	// executor, continuing events (engine.Options.Events). The node starts it
	// (Start as the leader, StartStandby as a follower).
	NewEngine func(events *engine.EventLog) (*engine.Engine, error)
	// Lead starts the leader's components over an engine that is opened
	// (engine.Engine.Open: lanes and settings loaded) but decides nothing
	// yet: first what must be in force before the engine decides — the
	// policy plugins, with the policy choices the store keeps — then
	// start, which starts the engine (its recovery decides the attempts the
	// previous leader left under way, then it dispatches), then the rest.
	// If Lead returns without calling start, the node calls it. ctx ends
	// when leadership does.
	Lead func(ctx context.Context, e *engine.Engine, start func() error) (*Leadership, error)
	// Registry is the node's instance registry, used while it leads (the
	// leader engine is its sink); nil refuses instance operations.
	Registry *executor.Registry
	Logger   hclog.Logger
	// TTL and RenewEvery tune the lease (defaults 10 s and 2 s): a dead
	// leader is replaced within TTL + RenewEvery.
	TTL, RenewEvery time.Duration
	// TakeoverBackoff is how long a node that took the lease but could not
	// start leading waits before it campaigns again, given how many of its
	// takeovers in a row have failed (1 for the first). Nil: RenewEvery,
	// doubled at each failure up to three TTLs (DefaultTakeoverBackoff). The
	// count starts again after a leadership that lasted at least a TTL.
	TakeoverBackoff func(failures int) time.Duration
	// FollowBackoff is how long a follower whose following of the leader's
	// events stopped on an error waits before it starts again, given how
	// many times in a row it has stopped (1 for the first). Nil: a second,
	// doubled at each failure up to 30 s (DefaultFollowBackoff).
	FollowBackoff func(failures int) time.Duration
	// EventBuffer is the node's event log size (default 65,536).
	EventBuffer int
	// Heartbeat is the interval of the node's heartbeat (default 2 s).
	Heartbeat time.Duration
	// CallTimeout bounds a call to the leader that has no deadline of its
	// own (default 10 s).
	CallTimeout time.Duration
	// MaxWasmBytes is the largest plugin module the API takes (the plugin
	// manager's limit, the same on every node).
	MaxWasmBytes int
}

// Node is one node of a cluster.
type Node struct {
	opts     Options
	log      hclog.Logger
	withheld storeerr.Log // the full errors of answers sent to followers in general terms
	store    *postgres.Store
	events   *engine.EventLog
	ids      *engine.IDGenerator
	handlers map[string]handler
	relay    *relay
	reads    readCache

	mu   sync.Mutex
	eng  *engine.Engine
	lead *Leadership
	cur  *leader // while leading
	// took is closed while this node leads (cur is set): reads that
	// wait for the leader's answer serve themselves then (tookOver).
	took     chan struct{}
	stopLead context.CancelFunc
	leading  bool
	epoch    uint64
	since    time.Time
	follow   context.CancelFunc
	followWG sync.WaitGroup
	runCtx   context.Context
	// failedTakeovers counts the takeovers in a row that could not start
	// leading (TakeoverBackoff).
	failedTakeovers int
	// commitsSince is when this node, leading, first saw its commits
	// fail in their current run of failures; zero while they succeed
	// (commitReport).
	commitsSince time.Time

	// forgettings counts the times this node, leading, removed the nodes
	// silent for ForgetAfter (forget): for the tests.
	forgettings atomic.Int64

	elector *postgres.Elector
	// electing is closed once the elector's Run has returned (and so
	// released the lease); nil until Start runs it.
	electing chan struct{}
	ready    atomic.Bool
	// stopping is set once Stop has begun: the node is not ready from
	// then on (Ready), whatever it still finishes.
	stopping atomic.Bool

	// The failures that repeat while the database or the leader is away,
	// logged by their changes of state (package failing).
	leaderReads, beats, commandReads failing.State
	// What the leader reports of itself, logged by its changes of state
	// too (leaderhealth.go).
	leaderCommits, leaderSilent failing.State
	// follows fails while the node, following, does not replicate the
	// leader's events: following stopped on an error, or its standby
	// engine cannot start (Ready).
	follows failing.State
	// replicate, when set, replaces engine.Engine.Replicate (tests).
	replicate atomic.Pointer[func(*engine.Engine, []engine.Event) error]
	// health is what the last heartbeat learnt of the store, the lease and
	// the leader (Ready).
	health struct {
		sync.Mutex
		beatErr    error     // the last heartbeat's failure; nil: it succeeded
		failSince  time.Time // since when heartbeats have failed
		noLeader   time.Time // since when no node has held the lease; zero: one does
		leaseKnown bool      // a heartbeat has read the lease
		// leader is what the last heartbeat that read the lease learnt of
		// the leader's health; lastFailure the last time it was failing.
		leader, lastFailure leaderHealth
		// failing is closed while the leader is known to fail its
		// commits (calls waiting for its answers give up then).
		failing chan struct{}
		// followErr is why the node last stopped following (follows).
		followErr error
		// plugins is what the last report of a leader that listed its
		// plugins said of them (KnownPlugins).
		plugins *pluginFigures
	}
}

// New returns a node. Run starts it.
func New(opts Options) (*Node, error) {
	if opts.Store == nil || opts.NewEngine == nil || opts.Lead == nil || opts.Node == "" {
		return nil, errors.New("cluster: Node, Store, NewEngine and Lead are required")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.EventBuffer == 0 {
		opts.EventBuffer = 1 << 16
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 2 * time.Second
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 10 * time.Second
	}
	if opts.FollowBackoff == nil {
		opts.FollowBackoff = DefaultFollowBackoff
	}
	n := &Node{opts: opts, log: opts.Logger.Named("cluster"), store: opts.Store,
		events: engine.NewEventLog(opts.EventBuffer), ids: engine.NewIDGenerator(0), handlers: newHandlers(), relay: newRelay()}
	el, err := opts.Store.NewElector(postgres.ElectorOptions{Node: opts.Node, TTL: opts.TTL, RenewEvery: opts.RenewEvery,
		OnElected: n.elected, OnDeposed: n.deposed})
	if err != nil {
		return nil, err
	}
	n.elector = el
	if n.opts.TakeoverBackoff == nil {
		eo := el.Options()
		n.opts.TakeoverBackoff = func(failures int) time.Duration {
			return DefaultTakeoverBackoff(eo.RenewEvery, eo.TTL, failures)
		}
	}
	return n, nil
}

// DefaultTakeoverBackoff is the backoff of a node whose failures-th
// takeover in a row failed, under a lease of ttl renewed every renewEvery:
// renewEvery, doubled at each further failure, up to 3 × ttl.
func DefaultTakeoverBackoff(renewEvery, ttl time.Duration, failures int) time.Duration {
	d, limit := renewEvery, 3*ttl
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// DefaultFollowBackoff is the backoff of a follower whose following of the
// leader's events stopped failures times in a row: a second, doubled at
// each further failure, up to 30 s.
func DefaultFollowBackoff(failures int) time.Duration {
	d, limit := time.Second, 30*time.Second
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Start brings the node up as a follower and starts campaigning, its
// heartbeat and, while it follows, the replication of events. It returns
// once the node can serve (its standby engine is up); Run's work goes on
// until ctx ends.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	n.runCtx = ctx
	err := n.standbyLocked(ctx)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	n.ready.Store(true)
	// The node reports itself before it campaigns, so that a leader always
	// has a row in nodes: one elected and cut off before its first report
	// would not show at all, not even as the unhealthy follower it becomes.
	n.beat(ctx)
	go n.receive(ctx)
	electing := make(chan struct{})
	n.mu.Lock()
	n.electing = electing
	n.mu.Unlock()
	go func() {
		defer close(electing)
		if err := n.elector.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Error("the elector stopped", "error", err)
		}
	}()
	go n.heartbeat(ctx)
	go n.forget(ctx)
	return nil
}

// Stop stops the node: a leader drains its engine (running attempts get
// until ctx ends to finish) and then resigns, so that another node takes
// over at once. It returns once the lease is released (or ctx ends): a
// process that exits right after would otherwise leave the lease to
// expire, and the cluster without a leader for its TTL. From its first
// moment the node is not ready (Ready says it stops), leader or follower:
// a load balancer stops sending it work while it finishes.
func (n *Node) Stop(ctx context.Context) {
	n.stopping.Store(true)
	if l := n.leader(); l != nil && !l.eng.Standby() {
		// A leader drains while it still leads: new work is refused at
		// once through every node (this heartbeat reports the drain, and
		// forwarded calls are still applied, so they are answered rather
		// than left waiting), while its running tasks finish within ctx.
		// Then it stops leading and resigns.
		l.eng.Drain(ctx)
		n.beat(ctx)
		l.eng.Quiesce(ctx)
	}
	n.mu.Lock()
	n.runCtx = nil // no standby engine after this
	electing := n.electing
	if n.follow != nil {
		n.follow()
		n.follow = nil
	}
	lead, stopLead, e := n.lead, n.stopLead, n.eng
	n.lead, n.cur, n.stopLead, n.took = nil, nil, nil, nil
	n.mu.Unlock()
	n.followWG.Wait()
	if lead != nil && lead.Stop != nil {
		lead.Stop()
	}
	if stopLead != nil {
		stopLead()
	}
	if e != nil && !e.Standby() {
		if err := e.Shutdown(ctx); err != nil {
			n.log.Warn("engine shutdown", "error", err)
		}
	}
	lead.release()
	if n.opts.Registry != nil {
		n.opts.Registry.SetSink(nil)
	}
	n.elector.Resign()
	if electing != nil {
		select {
		case <-electing:
		case <-ctx.Done():
			n.log.Warn("stopped before the lease was released; the next leader waits for it to expire", "error", ctx.Err())
		}
	}
}

// leader returns what operations apply to while this node leads, or nil.
func (n *Node) leader() *leader {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cur
}

// tookOver returns a channel closed once this node leads (closed already
// if it does).
func (n *Node) tookOver() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.took == nil {
		n.took = make(chan struct{})
	}
	return n.took
}

// Events returns the node's event log: the same across its roles.
func (n *Node) Events() *engine.EventLog { return n.events }

// Engine returns the node's current engine: the leader's, or the standby one.
func (n *Node) Engine() *engine.Engine {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.eng
}

// Leading reports whether this node leads, and since when.
func (n *Node) Leading() (bool, time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leading, n.since
}

// ID returns the node's id.
func (n *Node) ID() string { return n.opts.Node }

// standbyLocked starts a standby engine and the replication of events into it.
func (n *Node) standbyLocked(ctx context.Context) error {
	e, err := n.newStandby(ctx)
	if err != nil {
		return err
	}
	n.followLocked(ctx, e)
	return nil
}

// newStandby builds and starts a standby engine; it reads the store, so it
// may wait on the database for long, and is called without n.mu.
func (n *Node) newStandby(ctx context.Context) (*engine.Engine, error) {
	e, err := n.opts.NewEngine(n.events)
	if err != nil {
		return nil, err
	}
	if err := e.StartStandby(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// followLocked makes the standby engine e the node's, and replicates the
// leader's events into it until ctx ends or n.follow is called.
func (n *Node) followLocked(ctx context.Context, e *engine.Engine) {
	n.eng, n.leading, n.since = e, false, time.Now()
	fctx, cancel := context.WithCancel(ctx)
	n.follow = cancel
	n.followWG.Add(1)
	go func() {
		defer n.followWG.Done()
		n.replicateFrom(fctx, e)
	}()
}

// replicateFrom replicates the leader's events into the standby engine e
// until ctx ends. When that stops on an error (Replicate refuses events —
// a gap in the seqs, where the store purged events the log still lacked —,
// or the store is closed) the node is not ready (Ready) and, after a
// backoff that grows while it keeps failing (Options.FollowBackoff), starts
// a new standby engine — which catches the log up from the store, or
// restarts it past what the store purged — and follows from there. The
// failures are logged by their changes of state, not each one.
func (n *Node) replicateFrom(ctx context.Context, e *engine.Engine) {
	failures := 0
	for {
		var delivered bool
		err := n.store.Follow(ctx, n.events.Last(), func(evs []engine.Event) error {
			if err := n.replicateInto(e, evs); err != nil {
				return err
			}
			delivered = true
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if delivered {
			failures = 0 // it followed for a while: the backoff starts again
		}
		for {
			failures++
			n.notFollowing(err, "following the leader's events stopped; starting again after a backoff, the next failures are not logged until it follows again",
				"error", err, "seq", n.events.Last())
			backoff := n.opts.FollowBackoff(failures)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			ne, serr := n.newStandby(ctx)
			if ctx.Err() != nil {
				return
			}
			if serr == nil {
				e = ne
				break
			}
			err = fmt.Errorf("start a standby engine: %w", serr)
		}
		n.mu.Lock()
		if ctx.Err() != nil { // elected, or stopping: they cancel under n.mu
			n.mu.Unlock()
			return
		}
		n.eng = e
		n.mu.Unlock()
		n.follows.OK(n.log, "following the leader's events again", "seq", n.events.Last())
	}
}

// replicateInto replicates evs into the standby engine e.
func (n *Node) replicateInto(e *engine.Engine, evs []engine.Event) error {
	if f := n.replicate.Load(); f != nil {
		return (*f)(e, evs)
	}
	return e.Replicate(evs)
}

// notFollowing records that the node does not follow the leader's events,
// because of err (Ready), and logs it by its changes of state.
func (n *Node) notFollowing(err error, msg string, args ...any) {
	n.health.Lock()
	n.health.followErr = err
	n.health.Unlock()
	n.follows.Fail(n.log, hclog.Error, msg, args...)
}

// elected runs when the node takes the lease (the store is already fenced to
// epoch): it stops following, starts a leader engine on the same event log
// — which reloads the queues and reclaims the previous leader's attempts —
// and the leader's components, commands and broadcasts.
func (n *Node) elected(ctx context.Context, epoch uint64) {
	start := time.Now()
	n.mu.Lock()
	if n.runCtx == nil {
		// Stop has begun: the process is going away, so the node leaves
		// the election (Stop resigns too, once it has stopped the rest).
		n.mu.Unlock()
		n.elector.Resign()
		return
	}
	if n.follow != nil {
		n.follow()
		n.follow = nil
	}
	n.mu.Unlock()
	n.followWG.Wait() // no replication into the log once the leader writes it
	e, err := n.opts.NewEngine(n.events)
	if err == nil {
		// Opened, not started: the stored policy choices are in force
		// (Lead) before the engine decides the previous leader's
		// interrupted attempts or dispatches anything.
		err = e.OpenTakingOver(ctx, n.opts.Node)
	}
	l := &leader{eng: e, reg: n.opts.Registry}
	// begin starts the engine once; a later call answers as the first did
	// (a Lead that ignored a failed start must not lead with that engine).
	var (
		started  bool
		startErr error
	)
	begin := func() error {
		if started {
			return startErr
		}
		started = true
		if startErr = ctx.Err(); startErr != nil { // deposed while Lead set up
			return startErr
		}
		if startErr = e.Start(ctx); startErr != nil {
			return startErr
		}
		if l.reg != nil {
			savedinstances.Restore(e, l.reg, n.log.Warn)
			l.reg.SetSink(e)
		}
		return nil
	}
	var lead *Leadership
	if err == nil {
		lead, err = n.opts.Lead(ctx, e, begin)
	}
	if err == nil {
		if err = begin(); err != nil && lead != nil {
			if lead.Stop != nil {
				lead.Stop()
			}
			defer lead.release() // after the engine is abandoned
		}
	}
	if err != nil {
		if e != nil {
			e.Abandon("could not start leading")
		}
		n.stepDown(epoch, err)
		return
	}
	l.plugins, l.schedules, l.pull, l.checks = lead.Plugins, lead.Schedules, lead.Pull, lead.Heartbeats
	lctx, stopLead := context.WithCancel(ctx)
	n.mu.Lock()
	n.eng, n.lead, n.cur, n.stopLead, n.leading, n.epoch, n.since = e, lead, l, stopLead, true, epoch, time.Now()
	if n.took == nil {
		n.took = make(chan struct{})
	}
	select {
	case <-n.took:
	default:
		close(n.took) // the reads waiting for the previous leader are served here
	}
	n.mu.Unlock()
	n.log.Info("leading", "node", n.opts.Node, "epoch", epoch, "took", time.Since(start).Round(time.Millisecond))
	go n.serveCommands(lctx, l)
	go n.broadcast(lctx, l)
}

// stepDown gives up a leadership that could not start (the engine it began
// is abandoned): the lease is released at once, so that another node can
// lead, the node follows the leader's events again from where its log is,
// and it campaigns again after the backoff, which grows while its takeovers
// keep failing. Only Stop takes a node out of the election.
func (n *Node) stepDown(epoch uint64, cause error) {
	n.mu.Lock()
	n.failedTakeovers++
	failures := n.failedTakeovers
	n.mu.Unlock()
	backoff := n.opts.TakeoverBackoff(failures)
	n.log.Error("could not start leading; stepping down", "node", n.opts.Node, "epoch", epoch, "error", cause,
		"failed_takeovers", failures)
	n.elector.StepDown(epoch, backoff)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.followAgainLocked(epoch) {
		n.log.Info("following the leader again; campaigning again after a backoff", "node", n.opts.Node, "epoch", epoch, "in", backoff)
	}
}

// followAgainLocked starts a standby engine and the replication of events
// into it again, after a leadership ended or could not start, retrying
// every second while that fails. It gives up when the node stops, or when
// the elector leads under an epoch after ended (its OnElected, which runs
// next, takes over without following). It reports whether the node
// follows. n.mu is released while the standby engine starts, which reads
// the store: a database that does not answer must not hold up every call
// that asks the node whether it leads, or whether it is ready.
func (n *Node) followAgainLocked(ended uint64) bool {
	for n.runCtx != nil && n.runCtx.Err() == nil {
		ctx := n.runCtx
		n.mu.Unlock()
		e, err := n.newStandby(ctx)
		n.mu.Lock()
		if n.runCtx == nil || n.runCtx.Err() != nil {
			return false // Stop began meanwhile: no standby engine after it
		}
		if err == nil {
			n.followLocked(ctx, e)
			n.follows.OK(n.log, "the standby engine started; following the leader's events again")
			return true
		}
		n.notFollowing(fmt.Errorf("start a standby engine: %w", err),
			"could not start following; retrying every second, the next failures are not logged until it starts", "error", err)
		n.mu.Unlock()
		time.Sleep(time.Second)
		n.mu.Lock()
		if ep, ok := n.elector.Leading(); ok && ep > ended {
			return false
		}
	}
	return false
}

// deposed runs when the node stops leading: the engine stops at once without
// writing anything more, and the node follows again.
func (n *Node) deposed(epoch uint64, reason error) {
	n.mu.Lock()
	e, lead, stopLead := n.eng, n.lead, n.stopLead
	if n.leading && time.Since(n.since) >= n.elector.Options().TTL {
		n.failedTakeovers = 0 // a leadership that lasted: takeovers work
	}
	n.lead, n.cur, n.stopLead, n.leading, n.took = nil, nil, nil, false, nil
	n.mu.Unlock()
	if e == nil || e.Standby() {
		return // Stop got here first
	}
	n.log.Warn("stopped leading", "node", n.opts.Node, "epoch", epoch, "reason", reason)
	if stopLead != nil {
		stopLead()
	}
	if lead != nil && lead.Stop != nil {
		lead.Stop()
	}
	if n.opts.Registry != nil {
		n.opts.Registry.SetSink(nil)
	}
	e.Abandon("leadership lost: " + reason.Error())
	lead.release()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.followAgainLocked(epoch)
}

// heartbeat reports the node's role and health to the nodes table every
// Options.Heartbeat, after the report Start made.
// A leader whose commits start or stop failing reports it at once (it looks
// four times a heartbeat), so that its followers learn of it at their next
// heartbeat.
func (n *Node) heartbeat(ctx context.Context) {
	t := time.NewTicker(n.opts.Heartbeat)
	defer t.Stop()
	look := time.NewTicker(max(n.opts.Heartbeat/4, time.Millisecond))
	defer look.Stop()
	var failing, draining bool // what the last report said of the commits, and of draining
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-look.C:
			if _, commits, _ := n.commitReport(); (commits != "") == failing && n.drainReport() == draining {
				continue
			}
		}
		failing, draining = n.beat(ctx)
	}
}

// beat reports the node's role and health once (Start reports first, then
// heartbeat every Options.Heartbeat); a failure is logged, and the next
// beat tries again. A beat that gets no answer within beatTimeout — a
// database that holds it, or a network that drops its packets, which no
// error would ever end — fails: else the node would go on reporting what
// its last answered heartbeat learnt (Ready). A leader reports whether its
// commits fail, and a follower reads the leader's report with the lease
// (leaderhealth.go). beat returns whether it reported failing commits,
// and a draining engine.
func (n *Node) beat(ctx context.Context) (commitsFail, draining bool) {
	leading, since := n.Leading()
	role := RoleFollower
	if leading {
		role = RoleLeader
	}
	epoch, commits, commitsSince := n.commitReport()
	draining = n.drainReport()
	health, _ := json.Marshal(report{LastSeq: n.events.Last(), Ready: n.ready.Load(), Epoch: epoch, Commits: commits,
		CommitsSince: commitsSince, Draining: draining, Plugins: n.pluginReport(ctx)})
	bctx, cancel := context.WithTimeout(ctx, n.beatTimeout())
	defer cancel()
	err := n.store.Heartbeat(bctx, postgres.NodeInfo{ID: n.opts.Node, Address: n.opts.Address, Role: role, Since: since,
		Version: n.opts.Version, Health: health})
	var lease postgres.LeaseReport
	if err == nil {
		lease, err = n.store.LeaseReport(bctx)
	}
	if ctx.Err() != nil {
		return commits != "", draining
	}
	n.noteHealth(err, lease, time.Now())
	if err != nil {
		n.beats.Fail(n.log, hclog.Warn, "heartbeat failed; the next failures are not logged until one succeeds", "error", err)
		return commits != "", draining
	}
	n.beats.OK(n.log, "heartbeat succeeds again")
	return commits != "", draining
}

// ForgetAfter is how long a node may go unheard of before the leader
// removes it from the nodes table, and so from the nodes query: a node
// stopped for good (a machine retired, a node id no longer used) does not
// stay there as an unhealthy follower for ever, while one that is down for
// a while — an upgrade, a night's outage — is shown, unhealthy, long
// enough to be noticed. A node that reports again is back at once.
const ForgetAfter = 24 * time.Hour

// forgetEvery is how often the leader removes the nodes silent for
// ForgetAfter: a node is forgotten at most a minute after its day, and
// the DELETE stays out of the heartbeat.
const forgetEvery = time.Minute

// forget removes, while the node leads, the nodes not heard from for
// ForgetAfter: once when it starts to lead (at its first look, every
// Options.Heartbeat), then every forgetEvery. It runs apart from the
// heartbeat, so that the DELETE adds nothing to a beat's time.
func (n *Node) forget(ctx context.Context) {
	t := time.NewTicker(n.opts.Heartbeat)
	defer t.Stop()
	var last time.Time // the last forgetting, zero while the node follows
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch leading, _ := n.Leading(); {
		case !leading:
			last = time.Time{}
		case last.IsZero() || time.Since(last) >= forgetEvery:
			last = time.Now()
			n.forgetSilent(ctx)
			n.forgettings.Add(1)
		}
	}
}

// forgetSilent removes the nodes not heard from for ForgetAfter once; a
// failure is logged at debug level: the next time tries again, and the
// heartbeat's own failures are what tell of a database in trouble.
func (n *Node) forgetSilent(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, n.beatTimeout())
	defer cancel()
	ids, err := n.store.ForgetSilentNodes(ctx, ForgetAfter)
	if err != nil {
		n.log.Debug("forgetting silent nodes failed", "error", err)
		return
	}
	if len(ids) > 0 {
		n.log.Info("removed from the nodes table the nodes not heard from for a day", "nodes", ids, "forget_after", ForgetAfter)
	}
}

// beatTimeout bounds one heartbeat: as long as the other nodes hear from
// a node before they count it unhealthy (three heartbeats and a second:
// Nodes).
func (n *Node) beatTimeout() time.Duration { return 3*n.opts.Heartbeat + time.Second }

// noteHealth records what a heartbeat at now learnt: whether it reached
// the store (err), whether a node held the lease, and what the leader
// reported of itself. A heartbeat that failed learnt nothing of the
// leader: what an earlier one learnt stands.
func (n *Node) noteHealth(err error, lease postgres.LeaseReport, now time.Time) {
	n.health.Lock()
	if err != nil {
		if n.health.beatErr == nil {
			n.health.failSince = now
		}
		n.health.beatErr = err
		n.health.Unlock()
		return
	}
	n.health.beatErr = nil
	n.health.leaseKnown = true
	switch {
	case lease.Held:
		n.health.noLeader = time.Time{}
	case n.health.noLeader.IsZero():
		n.health.noLeader = now
	}
	h, plugins := n.learnLeader(lease, now)
	if plugins != nil {
		n.health.plugins = plugins
	}
	n.health.Unlock()
	n.noteLeader(h)
}

// failover is how long a cluster may go without a leader in a failover:
// the lease's TTL and a renewal (the elector's defaults when unset), and a
// heartbeat to notice.
func (n *Node) failover() time.Duration {
	ttl, renew := n.opts.TTL, n.opts.RenewEvery
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	if renew == 0 {
		renew = 2 * time.Second
	}
	return ttl + renew + n.opts.Heartbeat
}

// Ready reports why this node cannot serve as it should, or nil. No node
// is ready once Stop has begun, nor while its heartbeats fail — the
// database is unreachable, or refuses writes (then it says so: it
// answered). Otherwise a leader answers as its engine does (serve
// asks its commits); a follower is not ready while the leader reports that
// its commits fail, or renews its lease without reporting (leaderhealth.go),
// nor while it does not follow the leader's events (replicateFrom,
// followAgainLocked): its reads and subscriptions fall behind then,
// nor once no node has held the leader lease for longer than a failover
// takes (TTL and a renewal, and a heartbeat to notice): every call it would
// forward to the leader fails then. A failover that takes its usual time
// does not make the followers unready: their calls wait for the new leader
// (and reads are refused at once, leaderless, exactly once it does).
func (n *Node) Ready() error {
	if n.stopping.Load() {
		return ErrStopping
	}
	leading, _ := n.Leading()
	n.health.Lock()
	defer n.health.Unlock()
	now := time.Now()
	if err := n.health.beatErr; err != nil {
		_, _, failed := n.beats.Failing()
		what := "the store cannot be reached"
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) {
			what = "the store refuses this node's heartbeats" // read-only, a full disk…: it answered
		}
		return fmt.Errorf("%s (%d heartbeats failed over %s): %w",
			what, failed, now.Sub(n.health.failSince).Round(time.Millisecond), err)
	}
	if leading {
		return nil
	}
	if failing, since, count := n.follows.Failing(); failing {
		return fmt.Errorf("this node does not follow the leader's events (%d failures over %s), so its reads and subscriptions fall behind: %w",
			count, now.Sub(since).Round(time.Millisecond), n.health.followErr)
	}
	if h := n.health.leader; h.failing() {
		return fmt.Errorf("the leader (%s) cannot commit (its report of %s ago): %s", h.node, h.since(now), h.commits)
	} else if h.silent {
		return fmt.Errorf("the leader (%s) renews its lease but has not reported its health for %s", h.node, h.since(now))
	}
	if nl := n.health.noLeader; !nl.IsZero() && now.Sub(nl) > n.failover() {
		return fmt.Errorf("no node has led the cluster for %s", now.Sub(nl).Round(time.Millisecond))
	}
	return nil
}

// ErrStopping is Ready's answer once the node has begun to stop.
var ErrStopping = errors.New("stopping: this node is shutting down")

// The roles a node reports.
const (
	RoleLeader   = "leader"
	RoleFollower = "follower"
)

// NodeStatus is one node as the cluster sees it.
type NodeStatus struct {
	ID        string
	Address   string
	Role      string    // RoleLeader exactly when Leader
	Since     time.Time // since when it has had Role
	Heartbeat time.Time
	Version   string
	// SchemaVersion is the store schema version its build knows (0: a
	// build before version 5, which does not report it).
	SchemaVersion int
	LastSeq       uint64
	Healthy       bool // heard from within three heartbeats
	Leader        bool // holds the lease now
	// CommitFailure, on the leader whose commits fail, is why, in general
	// terms (its report's Commits); CommitFailingSince is since when it has
	// seen them fail. Both are zero while its commits succeed and on every
	// other node (a report of an earlier leadership is ignored).
	CommitFailure      string
	CommitFailingSince time.Time
}

// Nodes returns every node that reported, with who leads.
func (n *Node) Nodes(ctx context.Context) ([]NodeStatus, error) {
	ns, err := n.store.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	lease, _ := n.store.Lease(ctx)
	out := make([]NodeStatus, len(ns))
	for i, x := range ns {
		var h report
		_ = json.Unmarshal(x.Health, &h)
		role, since := roleOf(x, lease)
		out[i] = NodeStatus{ID: x.ID, Address: x.Address, Role: role, Since: since, Heartbeat: x.Heartbeat,
			Version: x.Version, SchemaVersion: x.SchemaVersion, LastSeq: h.LastSeq, Leader: role == RoleLeader,
			Healthy: time.Since(x.Heartbeat) < n.beatTimeout()}
		if role != RoleLeader {
			continue
		}
		if x.ID == n.opts.Node {
			// This node leads: what it would report now, which its
			// heartbeat may have failed to write.
			if epoch, commits, cs := n.commitReport(); epoch == lease.Epoch {
				h.Epoch, h.Commits, h.CommitsSince = epoch, commits, cs
			}
		}
		if h.Epoch == lease.Epoch && h.Commits != "" {
			out[i].CommitFailure, out[i].CommitFailingSince = h.Commits, h.CommitsSince.UTC()
		}
	}
	return out, nil
}

// roleOf derives a node's role from the leader lease, the one source of
// truth: a node leads exactly while it holds the lease. What the node last
// reported lags behind (it reports every heartbeat, and a dead node reports
// nothing), so it only dates a follower's role when both agree.
func roleOf(x postgres.NodeInfo, lease postgres.Lease) (role string, since time.Time) {
	switch {
	case lease.Held && lease.Node == x.ID:
		return RoleLeader, lease.AcquiredAt
	case x.Role != RoleLeader:
		return RoleFollower, x.Since
	case lease.Node == x.ID: // its lease ran out (or was given up) and nobody took it yet
		return RoleFollower, lease.ExpiresAt
	case lease.Node != "": // another node took the lease: it stopped leading by then
		return RoleFollower, lease.AcquiredAt
	default:
		return RoleFollower, x.Heartbeat
	}
}

// Leader returns the node that holds the leader lease and since when it
// has; ok is false while none does.
func (n *Node) Leader(ctx context.Context) (node string, since time.Time, ok bool, err error) {
	l, err := n.store.Lease(ctx)
	if err != nil || !l.Held {
		return "", time.Time{}, false, err
	}
	return l.Node, l.AcquiredAt, true, nil
}

func (n *Node) String() string { return fmt.Sprintf("node %s", n.opts.Node) }
