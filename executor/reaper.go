// Idle tabs: a tab the executor opened for a session is closed once the
// session has left it unused for IdleTabTimeout, and the session is unbound so
// that its next task opens a fresh tab.

package executor

import (
	"context"
	"time"
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
	e.closeTabs(idle)
	return len(idle)
}

// closeTabs closes tabs on their instances, best effort, and unbinds their
// sessions.
func (e *Executor) closeTabs(tabs []*ownedTab) {
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
		if t.session != "" && sink != nil {
			sink.UnbindSession(t.session)
		}
		e.log.Debug("closed idle tab", "instance", t.instance, "tab", t.tab, "session", t.session)
	}
}
