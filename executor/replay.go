// Session replay (opt-in, engine.TaskSpec.SessionReplay): the executor keeps
// the actions that built a session's page, from its first task, and when the
// session's tab is lost it opens a new tab and runs them again before the
// task at hand, instead of failing that task with SESSION_LOST.

package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// DefaultMaxReplayActions is Options.MaxReplayActions when it is 0.
const DefaultMaxReplayActions = 64

// DefaultMaxReplayBytes is Options.MaxReplayBytes when it is 0: 1 MiB per
// session, four fills of the largest parameters a task may carry (256 KiB).
const DefaultMaxReplayBytes = 1 << 20

// replayLog is what a session did to its page.
type replayLog struct {
	actions []engine.Action // in order, from the session's first task; reads are left out
	bytes   int             // the actions' size (actionBytes)
	broken  bool            // no replay: why says why
	why     string
	// restored: the session was bound before a restart of the server
	// (AdoptSessions); its log, kept in memory only, went with the restart.
	restored bool
}

// breakOff marks the log as not replayable, for why, and lets its actions go.
func (l *replayLog) breakOff(why string) {
	l.broken, l.why, l.actions, l.bytes = true, why, nil, 0
}

// actionBytes is what an action weighs in a replay log: its kind, element
// and parameters (a fill's text is in its parameters).
func actionBytes(a *engine.Action) int {
	return len(a.Kind) + len(a.Ref) + len(a.Selector) + len(a.Params)
}

// replays reports whether kind changes a page (reads and binary captures do
// not, and close ends the session): those are the actions a replay repeats.
func replays(kind string) bool {
	switch routeOf(kind) {
	case routeRead, routeBinary, routeClose:
		return false
	}
	return true
}

// record adds a successful action of a session's task to the session's log.
// fresh says the attempt ran in a tab opened (or taken from the pool) for it:
// the session starts over there.
func (e *Executor) record(spec *engine.TaskSpec, fresh bool) {
	key := sessionOf(spec)
	if key == "" || spec.TabID != "" || spec.Action == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.replays[key]
	switch {
	case fresh && !spec.SessionReplay:
		delete(e.replays, key) // the session starts over without asking
		return
	case fresh:
		l = &replayLog{}
		e.replays[key] = l
	case l == nil:
		return // no log from the session's first task: nothing to replay
	}
	switch {
	case isClose(spec.Action.Kind):
		delete(e.replays, key)
	case l.broken:
	case !spec.SessionReplay:
		l.breakOff("one of its tasks (" + spec.Action.Kind + ") did not ask for replay")
	case len(l.actions) >= e.maxReplay:
		l.breakOff(fmt.Sprintf("it outgrew the executor's maxReplayActions (%d actions)", e.maxReplay))
	case replays(spec.Action.Kind):
		if n := l.bytes + actionBytes(spec.Action); n > e.maxReplayBytes {
			// A large fill is kept whole or not at all: a replay of part
			// of the page's history would build another page.
			l.breakOff(fmt.Sprintf("its %s action would have brought its log to %d bytes, past the executor's maxReplayBytes (%d)",
				spec.Action.Kind, n, e.maxReplayBytes))
			return
		}
		a := *spec.Action
		a.Params = slices.Clone(a.Params)
		l.actions = append(l.actions, a)
		l.bytes += actionBytes(&a)
	}
}

// recordNavigated records a click that failed with 409 navigation_changed:
// it did happen, and took the page elsewhere, so a replay repeats it, with
// waitNav. Other failures are not recorded.
func (e *Executor) recordNavigated(spec *engine.TaskSpec, fresh bool, err error) {
	var pe *pinchtab.Error
	if spec.Action == nil || !errors.As(err, &pe) || pe.Code != "navigation_changed" {
		return
	}
	params := map[string]any{}
	if len(spec.Action.Params) > 0 && json.Unmarshal(spec.Action.Params, &params) != nil {
		return
	}
	params["waitNav"] = true
	raw, jerr := json.Marshal(params)
	if jerr != nil {
		return
	}
	s := *spec
	a := *spec.Action
	a.Params = raw
	s.Action = &a
	e.record(&s, fresh)
}

// forgetReplay drops a session's log.
func (e *Executor) forgetReplay(session string) {
	if session == "" {
		return
	}
	e.mu.Lock()
	delete(e.replays, session)
	e.mu.Unlock()
}

// replayLogOf returns a copy of the session's actions, or why it cannot be
// replayed.
func (e *Executor) replayLogOf(session string) ([]engine.Action, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.replays[session]
	switch {
	case l != nil && l.restored:
		return nil, errors.New("the server restarted since the session's first task, and the replay log is kept in memory only: it went with the restart")
	case l == nil:
		return nil, errors.New("the session's log is not complete: its first task did not ask for replay, or an earlier replay of it failed")
	case l.broken:
		return nil, errors.New("the session's log is not complete: " + l.why)
	}
	return slices.Clone(l.actions), nil
}

// replayAndRun answers an attempt whose session's tab was lost (lostErr,
// wrapping ErrSessionLost) when the task asked for replay: a new tab on the
// lost tab's instance if it is healthy, else on a healthy browser instance;
// the session's actions again, in order; then the task's own action. A
// replay that cannot happen or fails leaves lostErr, with why.
func (e *Executor) replayAndRun(ctx context.Context, a Attempt, spec *engine.TaskSpec, lost target, lostErr error, t0 time.Time) (engine.Outcome, func()) {
	key := sessionOf(spec)
	fail := func(why error) (engine.Outcome, func()) {
		e.forgetReplay(key) // the session starts over
		return engine.Outcome{Err: engine.Permanent(fmt.Errorf("%w (replay: %w)", lostErr, why)), InstanceID: lost.instance,
			TabTime: time.Since(t0)}, nil
	}
	actions, err := e.replayLogOf(key)
	if err != nil {
		return fail(err)
	}
	id := lost.instance
	if _, snap, ok := e.reg.lookup(id); !ok || snap.Health == HealthUnhealthy || !snap.Kind.browser() {
		if id = e.reg.pick(KindInstance, KindServer); id == "" {
			// Not the session's fault: it waits, as an instance fault, for
			// a browser to replay it on (its log and its lost binding stay).
			return engine.Outcome{Err: engine.Transient(fmt.Errorf("%s is to be replayed, and no healthy browser instance has room: %w",
				engine.SessionLabel(key), engine.ErrInstanceFault)), InstanceID: lost.instance, TabTime: time.Since(t0)}, nil
		}
	}
	t, err := e.use(target{instance: id})
	if err != nil {
		return fail(err)
	}
	tab, err := e.openTab(ctx, t)
	if err != nil {
		e.reg.release(id)
		return fail(e.explain(ctx, err, t))
	}
	t.tab, t.session = tab, true
	owned := &ownedTab{session: key, agent: spec.AgentID, instance: id, tab: tab, lastUsed: time.Now(), busy: 1}
	e.mu.Lock()
	e.owned[tab] = owned
	e.mu.Unlock()
	if _, known := e.reg.tabs.get(tab); !known { // openTab keeps a server's browser
		e.reg.tabs.put(tab, tabEntry{instance: id})
	}
	a.Started(id, tab)
	for i := range actions {
		if _, err := e.perform(ctx, t, &actions[i], a.TaskID()); err != nil {
			e.done(t)
			e.mu.Lock()
			delete(e.owned, tab)
			e.mu.Unlock()
			e.closeTabs([]*ownedTab{owned}, false)
			return fail(fmt.Errorf("action %d of %d (%s) failed in the new tab %s on %s: %w", i+1, len(actions), actions[i].Kind, tab, id, err))
		}
	}
	e.log.Info("session replayed", "session", key, "task", a.TaskID(), "instance", id, "tab", tab, "actions", len(actions))
	return e.runIn(ctx, a, spec, t, time.Since(t0))
}
