// The tab → instance cache. A task may name a tab without naming its instance;
// the cache answers which instance owns it. On a miss it lists the tabs of
// every instance (GET /instances/tabs on PinchTab servers, GET /tabs on single
// instances) and looks again; a tab no list shows is asked for directly
// (GET /tabs/{id}/url), since PinchTab's lists leave out the tabs that show no
// page yet (about:blank). Tabs of removed instances are remembered for a
// while, so that a task naming one fails with a clear error rather than "not
// found".

package executor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab"
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
	unsure := r.refreshTabs(ctx, tab)
	if id, ok, err := r.resolveCached(tab); ok {
		return id, err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if id := r.findUnlisted(ctx, tab); id != "" {
		return id, nil
	}
	if len(unsure) > 0 {
		// The tab may be on an instance that could not list it now: its
		// fault, not the task's.
		return "", engine.Transient(fmt.Errorf("resolve tab %s: not listed by any instance that answered, and %s: %w",
			tab, strings.Join(unsure, "; "), engine.ErrInstanceFault))
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

// refreshTabs lists the tabs of every browser instance, in parallel, and
// refreshes the cache with what they answer. want is the tab being looked
// for: if another caller's listing found it meanwhile, there is nothing to
// do. It returns why some instances could not give a complete list (they are
// unhealthy, their listing failed, or a server has browsers that are not
// running), so that a tab listed nowhere is not taken for a tab that does
// not exist while an instance that may own it is down.
func (r *Registry) refreshTabs(ctx context.Context, want string) (unsure []string) {
	r.tabs.refresh.Lock()
	defer r.tabs.refresh.Unlock()
	if _, ok := r.tabs.get(want); ok && want != "" {
		return nil
	}
	type target struct {
		id   string
		kind Kind
	}
	r.mu.RLock()
	var targets []target
	for id, in := range r.insts {
		switch {
		case !in.cfg.Kind.browser():
		case in.st.Health == HealthUnhealthy:
			unsure = append(unsure, fmt.Sprintf("instance %s is unhealthy (%s)", id, in.st.LastError))
		default:
			targets = append(targets, target{id, in.cfg.Kind})
		}
	}
	r.mu.RUnlock()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, t := range targets {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, r.opts.TabListTimeout)
			defer cancel()
			listed, down, err := r.listTabs(lctx, t.id, t.kind)
			partial := partialOf(down)
			if err != nil {
				r.log.Debug("tab listing failed", "instance", t.id, "error", err)
				var pe *pinchtab.Error
				if errors.As(err, &pe) && pe.InstanceFault() {
					r.reportFault(t.id, err)
				}
				mu.Lock()
				unsure = append(unsure, fmt.Sprintf("instance %s could not list its tabs (%v)", t.id, err))
				mu.Unlock()
				return
			}
			if partial != "" {
				mu.Lock()
				unsure = append(unsure, fmt.Sprintf("instance %s %s", t.id, partial))
				mu.Unlock()
				// What is not listed may still be there: add, forget nothing.
				for tab, e := range listed {
					r.tabs.put(tab, e)
				}
				return
			}
			r.tabs.replace(t.id, listed, time.Now())
		})
	}
	wg.Wait()
	slices.Sort(unsure)
	return unsure
}

// findUnlisted asks every healthy browser instance, in parallel, whether it
// has tab although its tab list did not show it (PinchTab's lists leave out
// the tabs that show no page yet, such as a blank tab just opened), and
// returns the first that does, or "".
func (r *Registry) findUnlisted(ctx context.Context, tab string) string {
	r.mu.RLock()
	var ids []string
	for id, in := range r.insts {
		if in.cfg.Kind.browser() && in.st.Health != HealthUnhealthy {
			ids = append(ids, id)
		}
	}
	r.mu.RUnlock()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		found string
	)
	for _, id := range ids {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, r.opts.TabListTimeout)
			defer cancel()
			if ok, _ := r.probeTab(lctx, id, tab); ok {
				mu.Lock()
				if found == "" || id < found {
					found = id
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if found != "" {
		r.tabs.put(tab, tabEntry{instance: found})
	}
	return found
}

// listTabs asks one instance for its tabs. down, when not empty, is why the
// list may lack some: the statuses of a server's browsers that are not
// running (by id), which do not list theirs.
func (r *Registry) listTabs(ctx context.Context, id string, kind Kind) (tabs map[string]tabEntry, down map[string]string, err error) {
	client, _, ok := r.lookup(id)
	if !ok {
		return nil, nil, ErrUnknownInstance
	}
	out := make(map[string]tabEntry)
	switch kind {
	case KindServer:
		list, err := client.AllTabs(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range list {
			out[t.ID] = tabEntry{instance: id, remote: t.InstanceID}
		}
		browsers, err := client.Instances(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range browsers {
			if b.Status != "" && b.Status != "running" {
				if down == nil {
					down = make(map[string]string)
				}
				down[b.ID] = b.Status
			}
		}
	default:
		list, err := client.Tabs(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range list {
			out[t.ID] = tabEntry{instance: id}
		}
	}
	return out, down, nil
}

// partialOf says why a list with down browsers may lack some tabs, or "".
func partialOf(down map[string]string) string {
	if len(down) == 0 {
		return ""
	}
	list := make([]string, 0, len(down))
	for id, status := range down {
		list = append(list, id+" is "+status)
	}
	slices.Sort(list)
	return "has browsers that are not running (" + strings.Join(list, ", ") + ")"
}

// tabCheck asks an instance whether it still has a tab, refreshing its part
// of the cache. An instance that cannot answer is taken to still have it.
// down is not "" when the instance cannot tell because the tab's browser
// behind a PinchTab server is not running (stopped, restarting): a server
// answers 404 for the tabs of such a browser, which is the instance's fault,
// not the tab's (when the server does not say which browser owns the tab,
// any browser that is not running may).
func (r *Registry) tabCheck(ctx context.Context, id, tab string) (exists bool, down string) {
	_, snap, ok := r.lookup(id)
	if !ok {
		return false, ""
	}
	lctx, cancel := context.WithTimeout(ctx, r.opts.TabListTimeout)
	defer cancel()
	cached, _ := r.tabs.get(tab)
	listed, downs, err := r.listTabs(lctx, id, snap.Kind)
	if err != nil {
		return true, ""
	}
	if _, found := listed[tab]; found {
		if len(downs) > 0 {
			r.tabs.put(tab, listed[tab])
		} else {
			r.tabs.replace(id, listed, time.Now())
		}
		return true, ""
	}
	if len(downs) > 0 {
		// What is not listed may still be there: add, forget nothing.
		for t, e := range listed {
			r.tabs.put(t, e)
		}
		if status, ok := downs[cached.remote]; ok && cached.instance == id {
			return false, "browser " + cached.remote + " is " + status
		}
		if cached.remote == "" || cached.instance != id {
			return false, partialOf(downs)
		}
		// Its browser is running and does not list it: ask the tab.
	} else {
		r.tabs.replace(id, listed, time.Now())
	}
	// PinchTab's tab lists leave out the tabs that show no page
	// (about:blank, chrome://…): ask the tab itself.
	exists, sure := r.probeTab(lctx, id, tab)
	if exists && cached.instance == id {
		r.tabs.put(tab, cached)
	}
	return exists || !sure, ""
}

// probeTab asks an instance for a tab's URL (GET /tabs/{id}/url): whether it
// has the tab even though its tab list may leave it out, as PinchTab's lists
// leave out the tabs that show no page yet. sure is false when the answer
// says neither (a failure other than the tab's 404).
func (r *Registry) probeTab(ctx context.Context, id, tab string) (exists, sure bool) {
	client, _, ok := r.lookup(id)
	if !ok {
		return false, true
	}
	_, err := client.Read(ctx, tab, "url", nil)
	switch {
	case err == nil:
		return true, true
	case pinchtab.StatusOf(err) == http.StatusNotFound:
		return false, true
	}
	return false, false
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
