// The Executor: it takes an attempt from the engine, finds or opens its tab,
// forwards the work to the instance and reports how it ended.

package executor

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// Attempt is what the executor needs of an attempt. *engine.Run implements
// it; tests and tools can pass their own.
type Attempt interface {
	TaskID() string
	Spec() *engine.TaskSpec
	InstanceID() string // where the engine placed it, or ""
	TabID() string      // the tab to use (the task's own or its session's), or ""
	Started(instanceID, tabID string)
}

var _ Attempt = (*engine.Run)(nil)

// Options configures an Executor. Zero values mean the defaults.
type Options struct {
	Registry        *Registry      // required
	Artifacts       artifact.Store // where binaries go; default an in-memory store
	Logger          hclog.Logger
	IdleTabTimeout  time.Duration // tabs the executor opened close after this long unused; default 5m, negative never
	MaxInlineResult int           // larger answers become artifacts; default 256 KiB
	// MaxIdleTabs bounds the pooled tabs (opened for tab-less tasks, bound to
	// no session, unused) kept per instance for the next tab-less task of
	// the same agent; a released tab beyond it takes the place of the
	// pool's least recently used one, which is closed. A pooled tab that a
	// session's first task takes becomes that session's tab and leaves the
	// pool for good. Every task that takes a pooled tab finds it blank
	// (about:blank). Default 4; negative: no pool.
	MaxIdleTabs int
	// AbortGrace is how long a cancelled or timed-out attempt keeps waiting
	// for the instance's answer before it disconnects: the attempt, and the
	// slot it holds, end when the instance confirms the end of the action or
	// when the grace has passed, so that ceilings hold where the browsers
	// are, even on an instance that keeps working after a disconnect.
	// Default DefaultAbortGrace; it must stay below the engine's lease grace
	// (engine.Config.LeaseGrace), or the engine may free the slot and start
	// the task again while the instance still runs the action. Negative:
	// abort at once.
	AbortGrace time.Duration
	// MaxReplayActions bounds the actions kept per session that asked for
	// replay (engine.TaskSpec.SessionReplay); a session that does more can no
	// longer be replayed. Default DefaultMaxReplayActions.
	MaxReplayActions int
	// MaxReplayBytes bounds the bytes those actions take (their kinds,
	// elements and parameters: a fill's text in full); a session whose log
	// would grow past it can no longer be replayed, and a replay of it
	// fails with SESSION_LOST saying so. Default DefaultMaxReplayBytes.
	MaxReplayBytes int
}

// DefaultAbortGrace is Options.AbortGrace when it is 0.
const DefaultAbortGrace = 5 * time.Second

// ErrSessionLost is wrapped by the (permanent) error of an attempt whose
// session's tab is gone — closed behind Switchyard's back, lost with its
// instance's restart, or on an instance no longer registered (after a
// removal the engine says so with engine.Run.LostSession). The page state
// the session built is gone:
// the task fails at once rather than running in a fresh blank tab, its
// dependents follow the dependency rules, and the session's binding is
// forgotten, so that its next task starts over in a new tab.
var ErrSessionLost = errors.New("SESSION_LOST")

// errPooledTabGone marks an attempt that took an idle pooled tab which its
// instance no longer has (closed behind Switchyard's back, or lost in the
// instance's restart). The action never ran: the attempt runs again in
// another tab.
var errPooledTabGone = errors.New("the pooled tab is gone from its instance")

// maxStalePooledTabs bounds how many vanished pooled tabs one attempt steps
// over before it gives up (each is dropped from the pool, so the pool runs
// out of them first).
const maxStalePooledTabs = 64

// Executor forwards attempts to browser instances. It implements
// engine.Executor.
type Executor struct {
	reg            *Registry
	arts           artifact.Store
	log            hclog.Logger
	idle           time.Duration
	maxInline      int
	maxIdle        int
	grace          time.Duration
	maxReplay      int
	maxReplayBytes int

	mu sync.Mutex
	// replays holds the logs of the sessions that asked for replay, by
	// session key (replay.go).
	replays map[string]*replayLog
	owned   map[string]*ownedTab // tabs the executor opened, by tab id
	// pools holds each instance's idle pooled tabs (opened for a tab-less
	// task, bound to no session), least recently used first, so that taking
	// and returning one costs the same however many session tabs there are.
	// A tab in it may have been named by a task since (busy > 0): takePooled
	// skips it, and done puts it back.
	pools map[string][]*ownedTab

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// sessionOf is the key under which the executor keeps the session of a task
// that names no tab (its SessionKey, scoped to its agent:
// engine.TaskSpec.SessionScope), or "" when it has none.
func sessionOf(spec *engine.TaskSpec) string {
	if spec.SessionKey == "" {
		return ""
	}
	return spec.SessionScope()
}

// ownedTab is a tab the executor opened for a task without one.
type ownedTab struct {
	session  string // the session it was opened for (its scope: sessionOf), or ""
	agent    string // the agent it was opened for: only that agent's tasks take it from the pool
	instance string
	tab      string
	lastUsed time.Time
	busy     int  // attempts running in it
	pooled   bool // in its instance's pool (Executor.pools)
	restored bool // a session's tab from before a restart (AdoptSessions), unused since
}

var _ engine.Executor = (*Executor)(nil)

// New returns an executor over the registry's instances. Call Close to stop
// it.
func New(o Options) (*Executor, error) {
	if o.Registry == nil {
		return nil, errors.New("executor: a registry is required")
	}
	if o.Artifacts == nil {
		o.Artifacts = artifact.NewMemory()
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.IdleTabTimeout == 0 {
		o.IdleTabTimeout = 5 * time.Minute
	}
	if o.MaxInlineResult <= 0 {
		o.MaxInlineResult = 256 << 10
	}
	if o.MaxIdleTabs == 0 {
		o.MaxIdleTabs = 4
	}
	if o.AbortGrace == 0 {
		o.AbortGrace = DefaultAbortGrace
	}
	if o.MaxReplayActions <= 0 {
		o.MaxReplayActions = DefaultMaxReplayActions
	}
	if o.MaxReplayBytes <= 0 {
		o.MaxReplayBytes = DefaultMaxReplayBytes
	}
	e := &Executor{
		reg:       o.Registry,
		arts:      o.Artifacts,
		log:       o.Logger.Named("executor"),
		idle:      o.IdleTabTimeout,
		maxInline: o.MaxInlineResult,
		maxIdle:   max(o.MaxIdleTabs, 0),
		grace:     max(o.AbortGrace, 0),
		maxReplay: o.MaxReplayActions, maxReplayBytes: o.MaxReplayBytes,
		replays: make(map[string]*replayLog),
		owned:   make(map[string]*ownedTab),
		pools:   make(map[string][]*ownedTab),
		stop:    make(chan struct{}),
	}
	if e.idle > 0 {
		e.wg.Add(1)
		go e.reapLoop()
	}
	return e, nil
}

// Close stops closing idle tabs, then closes the tabs the executor opened,
// except sessions' tabs: those hold the sessions' pages, and a session's
// binding outlives a restart of the server (engine's stored bindings), so its
// next task, after the restart, runs in its own tab again.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() {
		close(e.stop)
		e.wg.Wait()
		e.mu.Lock()
		tabs := make([]*ownedTab, 0, len(e.owned))
		for _, t := range e.owned {
			if t.session == "" {
				tabs = append(tabs, t)
			}
		}
		e.owned = make(map[string]*ownedTab)
		e.pools = make(map[string][]*ownedTab)
		e.mu.Unlock()
		e.closeTabs(tabs, false)
	})
	return nil
}

// Start implements engine.Executor: the attempt runs in its own goroutine and
// finishes once.
func (e *Executor) Start(ctx context.Context, run *engine.Run) {
	go func() {
		o, after := e.execute(ctx, run)
		run.Finish(o)
		if after != nil {
			after()
		}
	}()
}

// Execute runs an attempt to its end and returns how it ended. Start is
// Execute in a goroutine.
func (e *Executor) Execute(ctx context.Context, a Attempt) engine.Outcome {
	o, after := e.execute(ctx, a)
	if after != nil {
		after()
	}
	return o
}

// execute runs an attempt. after, when not nil, must run once the outcome has
// been reported: it unbinds a session whose tab the attempt closed.
func (e *Executor) execute(ctx context.Context, a Attempt) (o engine.Outcome, after func()) {
	spec := a.Spec()
	start := time.Now()
	info := pinchtab.RequestInfo{AgentID: spec.AgentID, TaskID: a.TaskID()}
	info.Deadline, _ = ctx.Deadline()
	ctx = pinchtab.WithRequestInfo(ctx, info)
	switch {
	case spec.Action != nil:
		o, after = e.runAction(ctx, a, spec)
	case spec.Instruction != "":
		o = e.runInstruction(ctx, a, spec)
	default:
		o = engine.Outcome{Err: engine.Permanentf("task %s has neither an action nor an instruction", a.TaskID())}
	}
	if o.Err != nil {
		if errors.Is(o.Err, engine.ErrInstanceGone) {
			o.TabID = "" // nothing may bind to a tab whose instance is gone (Started reported it)
		}
		o.Err = classify(o.Err)
		if o.HTTPStatus == 0 {
			o.HTTPStatus = answeredStatus(o.Err)
		}
		e.log.Debug("attempt failed", "task", a.TaskID(), "instance", o.InstanceID, "tab", o.TabID, "error", o.Err, "took", time.Since(start))
	} else if e.log.IsTrace() {
		e.log.Trace("attempt done", "task", a.TaskID(), "instance", o.InstanceID, "tab", o.TabID, "took", time.Since(start))
	}
	return o, after
}

// target is where an attempt runs.
type target struct {
	instance string
	tab      string
	client   *pinchtab.Client
	named    bool // the task named the tab itself
	session  bool // the tab was bound to the task's session by an earlier task
	claimed  bool // takePooled already marked the (owned) tab busy
}

// attribute names the instance kind in an instance's error: "chromium
// click (POST …)" on the built-in Chromium, "pinchtab click" on PinchTab
// (pinchtab.Attribute).
func attribute(err error, t target) error {
	if t.client == nil {
		return err
	}
	return pinchtab.Attribute(err, t.client.Name())
}

// runAction runs an action task: its tab first (TabTime), then the action
// (ActionTime), each measured on its own.
func (e *Executor) runAction(ctx context.Context, a Attempt, spec *engine.TaskSpec) (engine.Outcome, func()) {
	t0 := time.Now()
	t, err := e.target(ctx, a, spec)
	tabTime := time.Since(t0)
	if err != nil {
		if spec.SessionReplay && errors.Is(err, ErrSessionLost) {
			return e.replayAndRun(ctx, a, spec, t, err, t0)
		}
		if errors.Is(err, ErrSessionLost) {
			e.forgetReplay(sessionOf(spec))
		}
		return engine.Outcome{Err: attribute(err, t), InstanceID: t.instance, TabID: t.tab, TabTime: tabTime}, nil
	}
	o, after := e.runIn(ctx, a, spec, t, tabTime)
	for n := 0; errors.Is(o.Err, errPooledTabGone) && n < maxStalePooledTabs && ctx.Err() == nil; n++ {
		// The idle tab it took was gone (its instance restarted, or someone
		// closed it): the action never ran, so it runs in another tab.
		e.log.Info("a pooled tab was gone from its instance: the attempt runs in another tab",
			"task", a.TaskID(), "instance", t.instance, "tab", t.tab)
		if t, err = e.target(ctx, a, spec); err != nil {
			return engine.Outcome{Err: err, InstanceID: t.instance, TabID: t.tab, TabTime: time.Since(t0)}, nil
		}
		o, after = e.runIn(ctx, a, spec, t, time.Since(t0))
	}
	if errors.Is(o.Err, ErrSessionLost) {
		if spec.SessionReplay {
			return e.replayAndRun(ctx, a, spec, t, o.Err, t0)
		}
		e.forgetReplay(sessionOf(spec))
	}
	return o, after
}

// runIn runs an action task in its tab t, found in tabTime.
func (e *Executor) runIn(ctx context.Context, a Attempt, spec *engine.TaskSpec, t target, tabTime time.Duration) (engine.Outcome, func()) {
	defer e.done(t)
	if t.claimed {
		t0 := time.Now()
		err := e.blankPooled(ctx, t)
		tabTime += time.Since(t0)
		if err != nil {
			return engine.Outcome{Err: attribute(err, t), InstanceID: t.instance, TabTime: tabTime}, nil
		}
	}
	a.Started(t.instance, t.tab)

	t1 := time.Now()
	rctx, release := e.graceful(ctx)
	res, err := e.perform(rctx, t, spec.Action, a.TaskID())
	release()
	actionTime := time.Since(t1)
	err = endedBy(ctx, err)
	if err != nil {
		err = attribute(err, t)
		e.recordNavigated(spec, !t.session, err)
		explain := e.explainAction
		if readOnly(spec.Action.Kind) {
			// Nothing happened in the browser that running the read again
			// would repeat: a fault is forgiven as one before the action.
			explain = e.explain
		}
		return engine.Outcome{Err: explain(ctx, err, t), InstanceID: t.instance, TabID: t.tab, TabTime: tabTime, ActionTime: actionTime}, nil
	}
	o := engine.Outcome{Result: res, HTTPStatus: http.StatusOK, InstanceID: t.instance, TabID: t.tab, TabTime: tabTime, ActionTime: actionTime}
	e.record(spec, !t.session)
	if isClose(spec.Action.Kind) {
		// The tab is gone: this task binds nothing to it.
		o.TabID = ""
		return o, e.closedTab(t.instance, t.tab, sessionOf(spec), a.TaskID())
	}
	return o, nil
}

// target finds the instance and tab of an action, opening a tab when the
// attempt has none.
func (e *Executor) target(ctx context.Context, a Attempt, spec *engine.TaskSpec) (target, error) {
	switch {
	case spec.TabID != "":
		// The task named its tab: it runs where that tab is, whatever the
		// placement, and nowhere else. A tab the executor opened for
		// another agent is not there for it (tenancy.go).
		op, method, endpoint := requestOf(spec.Action)
		if err := e.refuseForeignTab(spec.AgentID, spec.TabID, a.TaskID(), op, method, endpoint); err != nil {
			return target{tab: spec.TabID}, err
		}
		id, err := e.reg.resolveTab(ctx, spec.TabID)
		if err != nil {
			return target{tab: spec.TabID}, err
		}
		return e.use(target{instance: id, tab: spec.TabID, named: true})

	case a.TabID() != "":
		// The session's tab, bound by an earlier task.
		if id, why, lost := lostSession(a); lost {
			t := target{instance: id, tab: a.TabID(), session: true}
			return t, sessionLost(t, why, nil)
		}
		id := a.InstanceID()
		if id == "" {
			if e2, ok := e.reg.tabs.get(a.TabID()); ok {
				id = e2.instance
			}
		}
		t := target{instance: id, tab: a.TabID(), session: true}
		_, snap, ok := e.reg.lookup(id)
		switch {
		case !ok:
			return t, sessionLost(t, "its instance was removed", nil)
		case snap.Health == HealthUnhealthy:
			// It may come back with the tab: wait, without spending the budget.
			return t, engine.Transient(fmt.Errorf("session tab %s: instance %s is unhealthy (%s): %w", t.tab, id, snap.LastError, engine.ErrInstanceFault))
		}
		e.adopt(t, sessionOf(spec))
		return e.use(t)
	}

	// No tab: open one on the placed instance.
	id := a.InstanceID()
	_, snap, ok := e.reg.lookup(id)
	if id != "" && !ok {
		return target{instance: id}, engine.Transient(fmt.Errorf("instance %s is not registered: %w", id, engine.ErrInstanceGone))
	}
	if ok && snap.Health == HealthUnhealthy {
		return target{instance: id}, engine.Transient(fmt.Errorf("instance %s is unhealthy (%s): %w: %w", id, snap.LastError, engine.ErrInstanceFault, engine.ErrInstanceGone))
	}
	if id == "" || !snap.Kind.browser() {
		// The engine placed nothing, or a chat instance: pick a browser.
		if id = e.reg.pick(KindInstance, KindServer); id == "" {
			return target{}, engine.Transient(fmt.Errorf("no healthy browser instance with room: %w: %w", engine.ErrInstanceFault, engine.ErrInstanceGone))
		}
	}
	if tab := e.takePooled(id, spec.AgentID, sessionOf(spec)); tab != "" {
		t, err := e.use(target{instance: id, tab: tab, claimed: true})
		if err != nil {
			e.unclaim(tab)
		}
		return t, err
	}
	t, err := e.use(target{instance: id})
	if err != nil {
		return t, err
	}
	tab, err := e.openTab(ctx, t)
	if err != nil {
		e.reg.release(id)
		return target{instance: id}, e.explain(ctx, err, t)
	}
	t.tab = tab
	e.mu.Lock()
	e.owned[tab] = &ownedTab{session: sessionOf(spec), agent: spec.AgentID, instance: id, tab: tab, lastUsed: time.Now(), busy: 1}
	e.mu.Unlock()
	if _, known := e.reg.tabs.get(tab); !known { // openTab keeps a server's browser
		e.reg.tabs.put(tab, tabEntry{instance: id})
	}
	return t, nil
}

var _ engine.SessionAdopter = (*Executor)(nil)

// AdoptSessions takes charge of the sessions' bindings an engine restored
// after a restart (engine.SessionAdopter): their tabs join the executor's
// books as if just used, so that a session never used again has its tab
// closed, and its binding dropped, after the idle timeout, as a session bound
// since the restart would.
func (e *Executor) AdoptSessions(bs []engine.SessionBinding) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range bs {
		if b.SessionKey == "" || b.TabID == "" {
			continue
		}
		if _, ok := e.owned[b.TabID]; !ok {
			agent, _ := engine.SplitSessionScope(b.SessionKey)
			e.owned[b.TabID] = &ownedTab{session: b.SessionKey, agent: agent, instance: b.InstanceID, tab: b.TabID, lastUsed: now, restored: true}
		}
		if _, ok := e.replays[b.SessionKey]; !ok {
			// Whatever it logged went with the restart: a replay of it
			// says so rather than rebuilding half a page.
			e.replays[b.SessionKey] = &replayLog{broken: true, restored: true}
		}
	}
}

// adopt takes into the executor's books a session's tab it did not open
// itself (a binding restored after a restart): it is reaped when idle and its
// session is unbound when it closes, as with the tabs it opens.
func (e *Executor) adopt(t target, session string) {
	if session == "" {
		return
	}
	e.mu.Lock()
	if _, ok := e.owned[t.tab]; !ok {
		agent, _ := engine.SplitSessionScope(session)
		e.owned[t.tab] = &ownedTab{session: session, agent: agent, instance: t.instance, tab: t.tab, lastUsed: time.Now()}
	}
	e.mu.Unlock()
	e.reg.tabs.put(t.tab, tabEntry{instance: t.instance})
}

// use claims an instance for an attempt: its client, its in-flight count, and
// the tab's busy mark when the executor owns the tab (unless takePooled
// marked it already).
func (e *Executor) use(t target) (target, error) {
	client, _, ok := e.reg.lookup(t.instance)
	if !ok {
		return t, engine.Transient(fmt.Errorf("instance %s is not registered: %w", t.instance, engine.ErrInstanceGone))
	}
	t.client = client
	e.reg.acquire(t.instance)
	if t.tab != "" && !t.claimed {
		e.mu.Lock()
		if o, ok := e.owned[t.tab]; ok {
			o.busy++
			o.lastUsed = time.Now()
			o.restored = false
		}
		e.mu.Unlock()
	}
	return t, nil
}

// done releases what use claimed. A pooled tab (opened for a tab-less task
// of no session) goes back to its instance's pool; when the pool is full, the
// pool's least recently used tab is closed to make room (the pool serves the
// agents that work now), or the tab itself when there is no pool.
func (e *Executor) done(t target) {
	e.reg.release(t.instance)
	var extra *ownedTab
	e.mu.Lock()
	if o, ok := e.owned[t.tab]; ok && o.busy > 0 {
		o.busy--
		o.lastUsed = time.Now()
		if o.busy == 0 && o.session == "" && !o.pooled {
			pool := e.pools[o.instance]
			lru := slices.IndexFunc(pool, func(x *ownedTab) bool { return x.busy == 0 })
			switch {
			case len(pool) < e.maxIdle:
				e.poolLocked(o)
			case lru < 0:
				delete(e.owned, o.tab)
				extra = o
			default:
				extra = pool[lru]
				delete(e.owned, extra.tab)
				e.unpoolLocked(extra)
				e.poolLocked(o)
			}
		}
	}
	e.mu.Unlock()
	if extra != nil {
		e.closeTabs([]*ownedTab{extra}, false)
	}
}

// poolLocked puts an idle tab of no session in its instance's pool, as the
// most recently used.
func (e *Executor) poolLocked(o *ownedTab) {
	o.pooled = true
	e.pools[o.instance] = append(e.pools[o.instance], o)
}

// unpoolLocked takes tabs out of their instances' pools (they were closed).
func (e *Executor) unpoolLocked(tabs ...*ownedTab) {
	for _, o := range tabs {
		if !o.pooled {
			continue
		}
		o.pooled = false
		pool := slices.DeleteFunc(e.pools[o.instance], func(x *ownedTab) bool { return x == o })
		if len(pool) == 0 {
			delete(e.pools, o.instance)
		} else {
			e.pools[o.instance] = pool
		}
	}
}

// takePooled claims the most recently used idle pooled tab of an instance
// that was opened for agent, for an attempt of session (which then owns it,
// when not ""), or returns "" when there is none. A tab opened for another
// agent is never taken: it holds that agent's pages, and on an instance that
// keeps a browser context per agent (the built-in Chromium), its cookies and
// storage. The tab is marked busy under the same lock that found it idle, so
// that no other attempt and no reaping of idle tabs can take it in between;
// unclaim undoes the claim when the attempt cannot use it. The attempt blanks
// the tab before its action (blankPooled).
func (e *Executor) takePooled(instance, agent, session string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	pool := e.pools[instance]
	var best *ownedTab
	for i := len(pool) - 1; i >= 0 && best == nil; i-- {
		o := pool[i]
		switch {
		case o.busy != 0 || o.session != "":
			// A task named it: done pools it again.
		case o.agent != agent:
			continue
		default:
			best = o
		}
		o.pooled = false
		pool = slices.Delete(pool, i, i+1)
	}
	if len(pool) == 0 {
		delete(e.pools, instance)
	} else {
		e.pools[instance] = pool
	}
	if best == nil {
		return ""
	}
	best.session = session
	best.busy++
	best.lastUsed = time.Now()
	return best.tab
}

// blankPooled empties a pooled tab that an attempt took (takePooled) before
// the attempt's action runs: it navigates the tab to about:blank, so that no
// page, form state or script of the task that used it last is there to be
// read. A tab that cannot be blanked is closed and never used again: the
// attempt runs in another tab (errPooledTabGone), or waits for its instance
// (an instance fault).
func (e *Executor) blankPooled(ctx context.Context, t target) error {
	_, err := t.client.Navigate(ctx, t.tab, "about:blank", nil)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if err := e.explain(ctx, err, t); errors.Is(err, errPooledTabGone) || errors.Is(err, engine.ErrInstanceFault) {
		return err
	}
	e.mu.Lock()
	o, ok := e.owned[t.tab]
	if ok {
		delete(e.owned, t.tab)
		e.unpoolLocked(o)
		o.session = "" // it was claimed for the attempt's session, which never ran in it
	}
	e.mu.Unlock()
	if ok {
		e.closeTabs([]*ownedTab{o}, false)
	}
	e.log.Info("a pooled tab could not be blanked: it is closed and the attempt runs in another tab",
		"instance", t.instance, "tab", t.tab, "error", err)
	return fmt.Errorf("%w: it could not be blanked: %w", errPooledTabGone, err)
}

// unclaim gives back a tab takePooled claimed for an attempt that could not
// use it: idle again, and in the pool again.
func (e *Executor) unclaim(tab string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.owned[tab]; ok && o.busy > 0 {
		o.busy--
		if o.busy == 0 {
			o.session = ""
			if !o.pooled {
				e.poolLocked(o)
			}
		}
	}
}

// openTab opens a blank tab on an instance.
func (e *Executor) openTab(ctx context.Context, t target) (string, error) {
	_, snap, _ := e.reg.lookup(t.instance)
	if snap.Kind != KindServer {
		opened, err := t.client.OpenTab(ctx, "")
		return opened.TabID, err
	}
	// A PinchTab server: open the tab in its running browser with the
	// fewest tabs.
	browsers, err := t.client.Instances(ctx)
	if err != nil {
		return "", err
	}
	counts := make(map[string]int)
	e.reg.tabs.mu.RLock()
	for _, te := range e.reg.tabs.tabs {
		if te.instance == t.instance {
			counts[te.remote]++
		}
	}
	e.reg.tabs.mu.RUnlock()
	best := ""
	for _, b := range browsers {
		if b.Status != "" && b.Status != "running" {
			continue
		}
		if best == "" || counts[b.ID] < counts[best] || (counts[b.ID] == counts[best] && b.ID < best) {
			best = b.ID
		}
	}
	if best == "" {
		// Its browser is starting, restarting or stopping: the instance's
		// fault, and it cannot run an action until a check says so.
		err := fmt.Errorf("PinchTab server %s has no running browser (%d listed)", t.instance, len(browsers))
		e.reg.reportFault(t.instance, err)
		return "", engine.Transient(fmt.Errorf("%w: %w: %w", err, engine.ErrInstanceFault, engine.ErrInstanceGone))
	}
	opened, err := t.client.OpenInstanceTab(ctx, best, "")
	if err != nil {
		return "", err
	}
	e.reg.tabs.put(opened.TabID, tabEntry{instance: t.instance, remote: best})
	return opened.TabID, nil
}

// explain turns a failed request into the error the engine should see:
//   - an instance fault (pinchtab.Error.InstanceFault: unreachable,
//     unauthorized, unavailable, starting or shutting down) makes the instance
//     unhealthy at once and wraps engine.ErrInstanceFault, so that the attempt
//     does not consume the task's budget; unless the task named its tab, it
//     also wraps engine.ErrInstanceGone, so that a tab-less retry may go to a
//     healthy instance. The error keeps the instance's own reason (its status
//     and code). For the request that carries out the attempt's action
//     (explainAction), a fault after which the action may have run
//     (pinchtab.Error.MayHaveRun) also wraps engine.ErrMayHaveRun;
//   - a 404 for a tab whose browser behind a PinchTab server is stopped or
//     restarting (the server answers so for that browser's tabs) is an
//     instance fault too;
//   - a 404 for the session's tab, which the instance no longer has, means
//     the tab vanished: ErrSessionLost, permanent (and ErrInstanceGone, so
//     that the engine forgets the binding);
//   - a 404 for an idle pooled tab the instance no longer has is
//     errPooledTabGone: the tab leaves the pool and the attempt runs in
//     another.
func (e *Executor) explain(ctx context.Context, err error, t target) error {
	return e.explainAs(ctx, err, t, false)
}

// explainAction is explain for the request that carries out the attempt's
// action (or instruction): an instance fault after which it may have run
// also wraps engine.ErrMayHaveRun, which the engine does not forgive a task
// that allows a single attempt. The requests before it (finding, opening or
// blanking the tab) never do: the action had not been sent; nor do reads
// (readOnly), which change nothing a second run would repeat.
func (e *Executor) explainAction(ctx context.Context, err error, t target) error {
	return e.explainAs(ctx, err, t, true)
}

func (e *Executor) explainAs(ctx context.Context, err error, t target, action bool) error {
	var pe *pinchtab.Error
	if !errors.As(err, &pe) {
		return err
	}
	if pe.Code == pinchtab.CodePageUnresponsive && t.tab != "" {
		// Whenever it arrives, even after the attempt's end: the tab is
		// gone, and nothing may use it again.
		return e.unresponsive(ctx, t, err, pe)
	}
	if ctx.Err() != nil {
		return err
	}
	switch {
	case pe.InstanceFault():
		e.reg.reportFault(t.instance, err)
		fault := engine.ErrInstanceFault
		if action && pe.MayHaveRun() {
			fault = fmt.Errorf("%w %w", engine.ErrInstanceFault, engine.ErrMayHaveRun)
		}
		if t.named || t.session {
			return engine.Transient(fmt.Errorf("instance %s: %w: %w", t.instance, fault, err))
		}
		return engine.Transient(fmt.Errorf("instance %s: %w: %w: %w", t.instance, fault, engine.ErrInstanceGone, err))
	case pe.Status == http.StatusNotFound && t.tab != "":
		exists, down := e.reg.tabCheck(ctx, t.instance, t.tab)
		switch {
		case down != "":
			// A PinchTab server answers 404 for the tabs of a browser
			// that is stopped or restarting: the instance's fault. The
			// 404's own verdict ("not retryable") no longer holds: the
			// error says it is an instance fault instead.
			fault := fmt.Errorf("PinchTab server %s %s: %w", t.instance, down, pe.AsInstanceFault())
			e.reg.reportFault(t.instance, fault)
			if t.named || t.session {
				return engine.Transient(fmt.Errorf("instance %s: %w: %w", t.instance, engine.ErrInstanceFault, fault))
			}
			return engine.Transient(fmt.Errorf("instance %s: %w: %w: %w", t.instance, engine.ErrInstanceFault, engine.ErrInstanceGone, fault))
		case exists:
		case t.session:
			if after := e.forgetTab(t.tab); after != nil {
				after()
			}
			return sessionLost(t, "it vanished from the instance", err)
		case t.claimed:
			// An idle pooled tab that vanished: out of the pool, and the
			// attempt tries another (runAction). No session was bound to
			// it: it was idle, and a session binds its tab only once its
			// task ran.
			_ = e.forgetTab(t.tab)
			return fmt.Errorf("%w: %w", errPooledTabGone, err)
		}
	}
	return err
}

// unresponsive is the error of an attempt whose tab's page stopped
// responding, which the instance closed for it (pinchtab.CodePageUnresponsive,
// pe): the tab leaves the executor's books (a pooled tab its pool, a
// session's tab its session). Repeating the action on that tab is never
// possible; whether the task may run again in another tab depends on what
// it needed of this one:
//   - a task that named the tab needed the page the tab held, which is
//     lost: permanent (a retry in a blank tab would only fail on a missing
//     element, or act on the wrong page);
//   - a task that ran in its session's tab, and heard of it within its
//     attempt, fails for good as well; the session's binding goes, with a
//     SESSION event that says why (InstanceSink.ExpireSession), and its
//     replay log, which rebuilt the page that is gone: its next task starts
//     over in a new tab;
//   - when the answer came only after the attempt ended (its timeout, a
//     cancellation: the engine may have decided on a retry already), the
//     session lost its tab as when a task of another session closes it
//     (InstanceSink.TabClosed: a SESSION event, and the retry or next task
//     fails with SESSION_LOST, or replays the session if it asked, so its
//     replay log stays): it never moves to a new tab unannounced;
//   - a task that got the tab for itself (tab-less, a session's first task)
//     loses nothing: transient, and its retry runs in a new tab.
//
// The error wraps engine.ErrInstanceGone, so that the engine binds nothing
// to the tab, but for the late answer in a session's tab, whose binding
// stays, marked lost. Its text says what happens next, not "instance gone"
// (the instance is fine) nor the instance's "not retryable" when the task
// runs again.
func (e *Executor) unresponsive(ctx context.Context, t target, err error, pe *pinchtab.Error) error {
	session := ""
	e.mu.Lock()
	if o, ok := e.owned[t.tab]; ok {
		session = o.session
	}
	e.mu.Unlock()
	sink := e.reg.currentSink()
	if t.session && session != "" && ctx.Err() != nil {
		_ = e.forgetTab(t.tab) // the session's binding stays, marked lost (TabClosed)
		if sink != nil {
			sink.TabClosed(t.instance, t.tab, "", "the instance, because its page stopped responding (page_unresponsive), "+
				"found once an attempt of the session had ended ("+context.Cause(ctx).Error()+")")
		}
		e.log.Info("a session's tab was closed after its attempt ended, because its page stopped responding: the session lost it",
			"session", session, "tab", t.tab, "instance", t.instance)
		return engine.Permanent(fmt.Errorf("the session's tab %s on instance %s was closed after the attempt ended, because its page stopped responding; "+
			"the session lost it: its next task fails with SESSION_LOST, or replays the session if it asked: %w", t.tab, t.instance, err))
	}
	e.forgetTab(t.tab) // its session's binding goes below, or with the outcome (ErrInstanceGone)
	if session != "" {
		e.forgetReplay(session) // it rebuilt the page that is gone
	}
	if sink != nil && session != "" {
		if t.named || t.session {
			// Bound to the session: it is told.
			sink.ExpireSession(session, t.tab, engine.SessionLabel(session)+"'s tab "+t.tab+" on instance "+t.instance+
				" was closed because its page stopped responding (page_unresponsive); its page state is lost and its next task starts over in a new tab")
		} else {
			sink.UnbindSession(session) // its first task's tab: not bound yet
		}
	}
	switch {
	case t.named:
		return engine.Permanent(fmt.Errorf("tab %s on instance %s was closed, its page is lost: %w", t.tab, t.instance, instanceGone{err}))
	case t.session:
		return engine.Permanent(fmt.Errorf("the session's tab %s on instance %s was closed, its page state is lost; the session's next task starts in a new tab: %w",
			t.tab, t.instance, instanceGone{err}))
	}
	err = withVerdict(err, pe, "the task may run again in a new tab")
	return engine.Transient(fmt.Errorf("tab %s on instance %s was closed: %w", t.tab, t.instance, instanceGone{err}))
}

// withVerdict returns err with a copy of pe, the *pinchtab.Error in it,
// whose message says verdict comes next (pinchtab.Error.Verdict): pe may
// be shared, and is left as it is.
func withVerdict(err error, pe *pinchtab.Error, verdict string) error {
	c := *pe
	c.Verdict = verdict
	if err == error(pe) {
		return &c
	}
	return verdictError{err: err, was: pe.Error(), pe: &c}
}

// verdictError is an error whose *pinchtab.Error says a verdict of the
// caller's: its text is err's with pe's message in place of was, and
// errors.As finds pe first.
type verdictError struct {
	err error
	was string
	pe  *pinchtab.Error
}

func (v verdictError) Error() string   { return strings.Replace(v.err.Error(), v.was, v.pe.Error(), 1) }
func (v verdictError) Unwrap() []error { return []error{v.pe, v.err} }

// instanceGone wraps an error in engine.ErrInstanceGone without saying so
// in its text: for a tab that is gone from an instance that is fine.
type instanceGone struct{ err error }

func (g instanceGone) Error() string   { return g.err.Error() }
func (g instanceGone) Unwrap() []error { return []error{g.err, engine.ErrInstanceGone} }

// lostSession asks the engine whether the attempt's session lost its tab
// (engine.Run.LostSession), on which instance, and how.
func lostSession(a Attempt) (instance, why string, lost bool) {
	l, ok := a.(interface{ LostSession() (string, bool) })
	if !ok {
		return "", "", false
	}
	if instance, lost = l.LostSession(); !lost {
		return "", "", false
	}
	why = "its instance was removed"
	if r, ok := a.(interface{ LostReason() string }); ok {
		why = r.LostReason()
	}
	return instance, why, true
}

// sessionLost is the error of an attempt whose session's tab is gone.
func sessionLost(t target, why string, cause error) error {
	err := fmt.Errorf("%w: the session's tab %s on instance %s is gone (%s); its page state is lost",
		ErrSessionLost, t.tab, t.instance, why)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	// The tab is gone, whatever became of the instance (why says): the
	// engine forgets the binding, and the text does not say "instance gone".
	return engine.Permanent(instanceGone{err})
}

// closedTab drops a tab a task closed from the executor's books. When the
// tab was a session's and the task was of that session (by is its session key,
// or ""), the session ended it: its binding and its replay log go, and its
// next task starts over in a new tab. When a task of another session, or of
// none, closed it, the session did not ask for that: the engine is told at
// once (InstanceSink.TabClosed), which announces it with a SESSION event and
// marks the session's binding lost, so that its next task fails with
// SESSION_LOST, or replays the session if it asked. It returns the func that
// unbinds the closing session, to run once the outcome is reported, or nil.
func (e *Executor) closedTab(instance, tab, by, taskID string) func() {
	closedBy := "a close task (" + taskID + ") of no session"
	if by != "" {
		closedBy = "a close task (" + taskID + ") of " + engine.SessionLabel(by)
	}
	if sink := e.reg.currentSink(); sink != nil {
		sink.TabClosed(instance, tab, by, closedBy)
	}
	e.mu.Lock()
	o, ok := e.owned[tab]
	e.mu.Unlock()
	if ok && o.session != "" && o.session != by {
		e.reg.tabs.forget(tab)
		e.mu.Lock()
		delete(e.owned, tab)
		e.unpoolLocked(o)
		e.mu.Unlock()
		e.log.Info("a session's tab was closed by a task of another session: the session lost it",
			"session", o.session, "tab", tab, "closedBy", closedBy)
		return nil
	}
	after := e.forgetTab(tab)
	if ok && o.session != "" {
		e.forgetReplay(o.session)
	}
	return after
}

// forgetTab drops a tab from the executor's books. It returns the func that
// unbinds the tab's session, to run once the outcome is reported, or nil.
func (e *Executor) forgetTab(tab string) func() {
	e.reg.tabs.forget(tab)
	e.mu.Lock()
	o, ok := e.owned[tab]
	delete(e.owned, tab)
	if ok {
		e.unpoolLocked(o)
	}
	e.mu.Unlock()
	if !ok || o.session == "" {
		return nil
	}
	return func() {
		if sink := e.reg.currentSink(); sink != nil {
			sink.UnbindSession(o.session)
		}
	}
}

func (e *Executor) runInstruction(ctx context.Context, a Attempt, spec *engine.TaskSpec) engine.Outcome {
	if id, why, lost := lostSession(a); lost && a.TabID() != "" {
		// The session's page is gone: an instruction about it cannot be
		// carried out elsewhere.
		return engine.Outcome{Err: sessionLost(target{instance: id, tab: a.TabID(), session: true}, why, nil), InstanceID: id}
	}
	id := a.InstanceID()
	_, snap, ok := e.reg.lookup(id)
	if !ok || snap.Kind != KindChat || snap.Health == HealthUnhealthy {
		// Placed nowhere, on an instance that takes no instructions, or on
		// one that stopped answering: use a healthy chat instance.
		if id = e.reg.pick(KindChat); id == "" {
			if !e.reg.hasKind(KindChat) {
				return engine.Outcome{Err: engine.Permanentf("instruction tasks need a chat instance, and none is registered")}
			}
			return engine.Outcome{Err: engine.Transient(fmt.Errorf("no healthy chat instance with room: %w: %w", engine.ErrInstanceFault, engine.ErrInstanceGone))}
		}
	}
	tab := spec.TabID
	if tab == "" {
		tab = a.TabID()
	} else if err := e.refuseForeignTab(spec.AgentID, tab, a.TaskID(), "chat", http.MethodPost, ""); err != nil {
		// A chat instance may drive the browser of a registered one: a
		// tab the executor opened for another agent is not there for it.
		return engine.Outcome{Err: err, InstanceID: id, TabID: tab}
	}
	t, err := e.use(target{instance: id, named: spec.TabID != ""})
	if err != nil {
		return engine.Outcome{Err: err, InstanceID: id}
	}
	defer e.done(t)
	a.Started(id, tab)
	var res pinchtab.ChatResult
	t1 := time.Now()
	rctx, release := e.graceful(ctx)
	if _, snap, _ := e.reg.lookup(id); snap.Dialect == DialectBrowserOS {
		res, err = t.client.ChatBrowserOS(rctx, pinchtab.BrowserOSChat{
			ConversationID: conversationID(a.TaskID()), Message: spec.Instruction, LLM: llmConfig(spec.Labels)})
	} else {
		res, err = t.client.Chat(rctx, pinchtab.ChatRequest{Instruction: spec.Instruction, TabID: tab})
	}
	release()
	actionTime := time.Since(t1) // a chat instance opens no tab for Switchyard: no TabTime
	err = endedBy(ctx, err)
	if err != nil {
		return engine.Outcome{Err: e.explainAction(ctx, err, t), InstanceID: id, TabID: tab, ActionTime: actionTime}
	}
	result, err := e.inline(ctx, res.Result, a.TaskID())
	if err != nil {
		return engine.Outcome{Err: err, InstanceID: id, TabID: tab, ActionTime: actionTime}
	}
	return engine.Outcome{Result: result, HTTPStatus: http.StatusOK, InstanceID: id, TabID: tab, ActionTime: actionTime}
}

// endedBy puts first, in the error of a request that failed after the
// attempt's context ended, why it ended (its deadline, a cancellation): the
// request itself may have been aborted later, by the abort grace, and only
// says "context canceled".
func endedBy(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if cause := context.Cause(ctx); !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// graceful returns the context for the request that performs an attempt's
// work. When ctx ends (a cancellation, the attempt's timeout), the request is
// not aborted at once: it may still get the instance's answer, which confirms
// that the action ended, for up to the abort grace; then it is aborted. The
// attempt, and the slot it holds in the engine, last until then, so that an
// instance that keeps working after a disconnect never runs more than its
// ceilings allow. Call release once the request is over.
func (e *Executor) graceful(ctx context.Context) (rctx context.Context, release func()) {
	if e.grace <= 0 {
		return ctx, func() {}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
		done  bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			timer = time.AfterFunc(e.grace, cancel)
		}
	})
	return rctx, func() {
		stop()
		mu.Lock()
		done = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// conversationID is the BrowserOS conversation of a task: a UUID derived
// from the task's id, so that every attempt of the task continues the same
// conversation and no two tasks share one.
func conversationID(taskID string) string {
	h := sha1.Sum([]byte("switchyard/conversation/" + taskID))
	h[6] = h[6]&0x0f | 0x50 // version 5 (name-based, SHA-1)
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// llmConfig is the task's LLM configuration: its labels "llm.<field>", as
// {"<field>": value}.
func llmConfig(labels map[string]string) map[string]string {
	var out map[string]string
	for k, v := range labels {
		if f, ok := strings.CutPrefix(k, "llm."); ok && f != "" {
			if out == nil {
				out = make(map[string]string)
			}
			out[f] = v
		}
	}
	return out
}

// answeredStatus is the instance's HTTP status for a failed attempt: that of
// a request it refused, or the 2xx with which it answered a wait whose
// condition was not met in time; 0 when no instance answered.
func answeredStatus(err error) int {
	if status := pinchtab.StatusOf(err); status != 0 {
		return status
	}
	var wt *pinchtab.WaitTimeoutError
	if errors.As(err, &wt) {
		return wt.Status
	}
	return 0
}

// classify gives err the class the engine's retry policy reads: the
// instance's verdict for HTTP failures, transient for network failures and
// timeouts — a wait that ran out of its own time included —, cancellation as
// it is.
func classify(err error) error {
	var (
		ce *engine.ClassifiedError
		wt *pinchtab.WaitTimeoutError
	)
	switch {
	case err == nil || errors.As(err, &ce):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return engine.Transient(err) // the attempt's time ran out, even if the request ended by the abort grace
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &wt):
		// The wait's own time ran out: transient, as an attempt whose
		// time ran out is, so that the retry policy decides the same
		// (by its code, wait_timeout, where it tells them apart).
		return engine.Transient(err)
	}
	var pe *pinchtab.Error
	if errors.As(err, &pe) {
		class := policy.ClassPermanent
		if pe.Retryable() {
			class = policy.ClassTransient
		}
		return &engine.ClassifiedError{Class: class, HTTPStatus: pe.Status, Err: err}
	}
	return engine.Transient(err)
}
