// Idle tabs: a tab the executor opened for a session (or a session's tab
// restored after a restart, AdoptSessions) is closed once the session has left
// it unused for IdleTabTimeout, and the session is unbound, with a SESSION
// event, so that its next task opens a fresh tab.

package executor

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/engine"
)

func (e *Executor) reapLoop() {
	defer e.wg.Done()
	every := e.idle / 4
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	if every > time.Minute {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.ReapIdleTabs(now)
		}
	}
}

// ReapIdleTabs closes the tabs the executor opened that no attempt has used
// since now minus the idle timeout, unbinds their sessions, and returns how
// many it closed. A loop calls it; tests call it with a chosen now.
func (e *Executor) ReapIdleTabs(now time.Time) int {
	if e.idle <= 0 {
		return 0
	}
	e.mu.Lock()
	var idle []*ownedTab
	for id, t := range e.owned {
		if t.busy == 0 && now.Sub(t.lastUsed) >= e.idle {
			idle = append(idle, t)
			delete(e.owned, id)
		}
	}
	e.unpoolLocked(idle...)
	e.mu.Unlock()
	e.closeTabs(idle, true)
	return len(idle)
}

// closeTabs closes tabs on their instances, best effort, and unbinds their
// sessions; idle says they were unused for the idle timeout, which each
// session is told with a SESSION event (InstanceSink.ExpireSession).
func (e *Executor) closeTabs(tabs []*ownedTab, idle bool) {
	sink := e.reg.currentSink()
	for _, t := range tabs {
		if client, _, ok := e.reg.lookup(t.instance); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := client.CloseTab(ctx, t.tab); err != nil {
				e.log.Debug("closing an idle tab failed", "instance", t.instance, "tab", t.tab, "error", err)
			}
			cancel()
		}
		e.reg.tabs.forget(t.tab)
		e.forgetReplay(t.session)
		switch {
		case t.session == "" || sink == nil:
		case idle:
			since := "after " + e.idle.String() + " unused"
			if t.restored {
				since = "unused for " + e.idle.String() + " since the server restarted"
			}
			sink.ExpireSession(t.session, t.tab, engine.SessionLabel(t.session)+"'s tab "+t.tab+" on instance "+t.instance+" was closed "+since+
				" (executor.idleTabTimeout); its binding is dropped and its next task starts over in a new tab")
		default:
			sink.UnbindSession(t.session)
		}
		e.log.Debug("closed idle tab", "instance", t.instance, "tab", t.tab, "session", t.session)
	}
}
