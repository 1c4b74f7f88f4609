// Agents' browser contexts: made on an agent's first tab, disposed once the
// agent has had no tab for Options.AgentContextIdle, so that an instance
// serving many short-lived agents does not keep every one's cookies, storage
// and cache for as long as it runs.

package chromium

import (
	"context"
	"fmt"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// DefaultAgentContextIdle is Options.AgentContextIdle when it is 0: the
// executor's default idle tab timeout (executor.Options.IdleTabTimeout), so
// that an agent whose last tab the executor closed as idle keeps its cookies
// for as long again.
const DefaultAgentContextIdle = 5 * time.Minute

// agentContext is an agent's browser context and what the instance knows of
// its tabs. Guarded by Instance.mu.
type agentContext struct {
	id      cdp.BrowserContextID
	opening int       // tabs being opened in it: it is not disposed meanwhile
	hadTab  bool      // it had a tab when last seen (a sweep, an open, a close)
	noTab   time.Time // since when it has had no tab, when !hadTab
}

// agentContext returns the agent's browser context, making it on first use,
// and counts a tab being opened in it (opening), which openTab ends with
// opened: a context is not disposed while a tab is being opened in it.
func (i *Instance) agentContext(ctx context.Context, agent string) (cdp.BrowserContextID, error) {
	i.ctxMu.Lock()
	defer i.ctxMu.Unlock()
	i.mu.Lock()
	if ac, ok := i.contexts[agent]; ok {
		ac.opening++
		i.mu.Unlock()
		return ac.id, nil
	}
	i.mu.Unlock()
	res, err := chromedp.CallBrowser(i.browserCtxFor(ctx), target.CreateBrowserContext, target.CreateBrowserContextParams{})
	if err != nil {
		return "", fmt.Errorf("create the browser context of agent %q: %w", agent, err)
	}
	id := res.BrowserContextID
	i.mu.Lock()
	i.contexts[agent] = &agentContext{id: id, opening: 1}
	i.agents[id] = agent
	i.mu.Unlock()
	i.log.Debug("browser context made", "agent", agent, "context", id)
	return id, nil
}

// opened ends what agentContext began for a tab: ok says the tab was opened,
// so the agent has a tab.
func (i *Instance) opened(agent string, ok bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if ac, found := i.contexts[agent]; found {
		ac.opening--
		if ok {
			ac.hadTab = true
		}
	}
}

// tabClosedLocked notes that a tab of agent closed at now: when the instance
// knows no other tab of the agent, the agent has had none since now. Call
// with i.mu held, the closed tab already out of i.tabs.
func (i *Instance) tabClosedLocked(agent string, now time.Time) {
	ac, ok := i.contexts[agent]
	if !ok || agent == "" {
		return
	}
	for _, t := range i.tabs {
		if t.agent == agent {
			return
		}
	}
	ac.hadTab, ac.noTab = false, now
}

// DisposeIdleContexts disposes the browser contexts of the agents that have
// had no tab since now minus Options.AgentContextIdle
// (Target.disposeBrowserContext: their cookies, storage and cache go), and
// returns how many it disposed. An agent's next tab after that is in a new,
// empty context. An agent that has a tab, or one being opened, keeps its
// context; so does one whose last tab closed less than the idle period
// before now. A tab that went away by itself (a page that closed itself) is
// counted from the first sweep that finds it gone, so a context is never
// disposed early. A loop calls it; tests call it with a chosen now.
func (i *Instance) DisposeIdleContexts(now time.Time) (int, error) {
	idle := i.opts.AgentContextIdle
	i.mu.Lock()
	n := len(i.contexts)
	i.mu.Unlock()
	if idle <= 0 || n == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(i.browserCtx, 10*time.Second)
	defer cancel()
	infos, err := chromedp.Targets(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the browser's targets: %w", err)
	}
	withTabs := make(map[cdp.BrowserContextID]bool)
	for _, info := range infos {
		if info.Type == "page" {
			withTabs[info.BrowserContextID] = true
		}
	}
	var gone []*agentContext
	var agents []string
	i.mu.Lock()
	for agent, ac := range i.contexts {
		switch {
		case ac.opening > 0, withTabs[ac.id]:
			ac.hadTab = true
		case ac.hadTab:
			// Its last tab went since it was last seen: idle from now.
			ac.hadTab, ac.noTab = false, now
		case now.Sub(ac.noTab) >= idle:
			delete(i.contexts, agent)
			delete(i.agents, ac.id)
			gone = append(gone, ac)
			agents = append(agents, agent)
		}
	}
	i.mu.Unlock()
	var errs []error
	for k, ac := range gone {
		if _, err := chromedp.CallBrowser(ctx, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: ac.id}); err != nil {
			i.log.Warn("disposing an idle agent's browser context failed", "agent", agents[k], "context", ac.id, "error", err)
			errs = append(errs, err)
			continue
		}
		i.log.Debug("idle agent's browser context disposed", "agent", agents[k], "context", ac.id, "idle", idle)
	}
	if len(errs) > 0 {
		return len(gone) - len(errs), fmt.Errorf("dispose %d idle browser contexts: %w", len(errs), errs[0])
	}
	return len(gone), nil
}

// disposeLoop runs DisposeIdleContexts every quarter of the idle period
// (between a second and a minute) until the instance closes.
func (i *Instance) disposeLoop() {
	defer i.wg.Done()
	every := min(max(i.opts.AgentContextIdle/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-i.stop:
			return
		case now := <-t.C:
			if _, err := i.DisposeIdleContexts(now); err != nil {
				i.log.Debug("disposing idle browser contexts", "error", err)
			}
		}
	}
}
