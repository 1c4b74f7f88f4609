// The tab → instance cache. A task may name a tab without naming its instance;
// the cache answers which instance owns it. On a miss it lists the tabs of
// every instance (GET /instances/tabs on PinchTab servers, GET /tabs on single
// instances) and looks again. Tabs of removed instances are remembered for a
// while, so that a task naming one fails with a clear error rather than "not
// found".

package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard/switchyard/engine"
)

// orphanRetention is how long the cache remembers the tabs of a removed
// instance.
const orphanRetention = time.Hour

type tabEntry struct {
	instance string
	remote   string // on a PinchTab server: the browser that owns the tab
}

type tabCache struct {
	mu      sync.RWMutex
	tabs    map[string]tabEntry
	gone    map[string]time.Time // removed instances, and when
	refresh sync.Mutex           // one listing at a time
}

func newTabCache() tabCache {
	return tabCache{tabs: make(map[string]tabEntry), gone: make(map[string]time.Time)}
}

func (c *tabCache) get(tab string) (tabEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.tabs[tab]
	return e, ok
}

func (c *tabCache) put(tab string, e tabEntry) {
	c.mu.Lock()
	c.tabs[tab] = e
	c.mu.Unlock()
}

func (c *tabCache) forget(tab string) {
	c.mu.Lock()
	delete(c.tabs, tab)
	c.mu.Unlock()
}

func (c *tabCache) forgetInstance(id string) {
	c.mu.Lock()
	for tab, e := range c.tabs {
		if e.instance == id {
			delete(c.tabs, tab)
		}
	}
	c.mu.Unlock()
}

// orphanInstance keeps the tabs of a removed instance, marked as gone.
func (c *tabCache) orphanInstance(id string, now time.Time) {
	c.mu.Lock()
	c.gone[id] = now
	c.mu.Unlock()
}

// replace sets the tabs of one instance to those listed.
func (c *tabCache) replace(id string, listed map[string]tabEntry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.gone, id) // registered again
	for tab, e := range c.tabs {
		if e.instance == id {
			delete(c.tabs, tab)
		}
	}
	for tab, e := range listed {
		c.tabs[tab] = e
	}
	for gid, at := range c.gone {
		if now.Sub(at) > orphanRetention {
			delete(c.gone, gid)
			for tab, e := range c.tabs {
				if e.instance == gid {
					delete(c.tabs, tab)
				}
			}
		}
	}
}

// Resolution errors for a task that named its tab. Both are permanent: the
// task asked for that tab, and no other will do. (They deliberately do not
// wrap engine.ErrInstanceGone, which asks the engine for another instance.)
// A tab whose instance is only unhealthy is an instance fault instead: the
// task waits for the instance to come back.
var (
	ErrTabNotFound     = errors.New("tab not found on any instance")
	ErrTabInstanceGone = errors.New("the tab's instance is gone")
)

// resolveTab returns the instance that owns tab, listing the tabs of every
// browser instance when the cache does not know it. The errors are final for
// a task that named the tab when the tab is nowhere or its instance was
// removed; an instance fault (engine.ErrInstanceFault) when the instance is
// unhealthy.
func (r *Registry) resolveTab(ctx context.Context, tab string) (string, error) {
	if id, ok, err := r.resolveCached(tab); ok {
		return id, err
	}
	r.refreshTabs(ctx, tab)
	if id, ok, err := r.resolveCached(tab); ok {
		return id, err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return "", engine.Permanent(fmt.Errorf("resolve tab %s: %w", tab, ErrTabNotFound))
}

// resolveCached answers from the cache; ok is false on a miss.
func (r *Registry) resolveCached(tab string) (id string, ok bool, err error) {
	e, hit := r.tabs.get(tab)
	if !hit {
		return "", false, nil
	}
	r.tabs.mu.RLock()
	_, removed := r.tabs.gone[e.instance]
	r.tabs.mu.RUnlock()
	_, snap, registered := r.lookup(e.instance)
	switch {
	case removed || !registered:
		return "", true, engine.Permanent(fmt.Errorf("resolve tab %s: its instance %s was removed: %w", tab, e.instance, ErrTabInstanceGone))
	case snap.Health == HealthUnhealthy:
		// It may come back with the tab: an instance fault, not the task's.
		return "", true, engine.Transient(fmt.Errorf("resolve tab %s: its instance %s is unhealthy (%s): %w", tab, e.instance, snap.LastError, engine.ErrInstanceFault))
	}
	return e.instance, true, nil
}

// refreshTabs lists the tabs of every browser instance that is not known to
// be down, in parallel, and refreshes the cache with what they answer. want is
// the tab being looked for: if another caller's listing found it meanwhile,
// there is nothing to do.
func (r *Registry) refreshTabs(ctx context.Context, want string) {
	r.tabs.refresh.Lock()
	defer r.tabs.refresh.Unlock()
	if _, ok := r.tabs.get(want); ok && want != "" {
		return
	}
	type target struct {
		id   string
		kind Kind
	}
	r.mu.RLock()
	var targets []target
	for id, in := range r.insts {
		if in.cfg.Kind.browser() && in.st.Health != HealthUnhealthy {
			targets = append(targets, target{id, in.cfg.Kind})
		}
	}
	r.mu.RUnlock()
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, r.opts.TabListTimeout)
			defer cancel()
			listed, err := r.listTabs(lctx, t.id, t.kind)
			if err != nil {
				r.log.Debug("tab listing failed", "instance", t.id, "error", err)
				return
			}
			r.tabs.replace(t.id, listed, time.Now())
		})
	}
	wg.Wait()
}

// listTabs asks one instance for its tabs.
func (r *Registry) listTabs(ctx context.Context, id string, kind Kind) (map[string]tabEntry, error) {
	client, _, ok := r.lookup(id)
	if !ok {
		return nil, ErrUnknownInstance
	}
	out := make(map[string]tabEntry)
	switch kind {
	case KindServer:
		tabs, err := client.AllTabs(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tabs {
			out[t.ID] = tabEntry{instance: id, remote: t.InstanceID}
		}
	default:
		tabs, err := client.Tabs(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tabs {
			out[t.ID] = tabEntry{instance: id}
		}
	}
	return out, nil
}

// tabExists asks an instance whether it still has a tab, refreshing its part
// of the cache. An instance that cannot answer is taken to still have it.
func (r *Registry) tabExists(ctx context.Context, id, tab string) bool {
	_, snap, ok := r.lookup(id)
	if !ok {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, r.opts.TabListTimeout)
	defer cancel()
	listed, err := r.listTabs(lctx, id, snap.Kind)
	if err != nil {
		return true
	}
	r.tabs.replace(id, listed, time.Now())
	_, found := listed[tab]
	return found
}

var _ engine.TabLocator = (*Registry)(nil)

// InstanceOfTab answers, from the cache only (it never calls an instance),
// which instance owns a tab: the engine asks it when it places a task that
// names a tab but no instance, so that the task counts against the right
// instance's capacity. A miss is resolved by the executor when it runs the
// task.
func (r *Registry) InstanceOfTab(tab string) (string, bool) {
	e, ok := r.tabs.get(tab)
	if !ok {
		return "", false
	}
	return e.instance, true
}
