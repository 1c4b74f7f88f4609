package engine

import (
	"context"
	"time"
)

// Housekeeping runs on the engine clock: it purges terminal tasks past the
// retention period from the store, in small batches so that a large purge
// never holds up dispatch, and forgets idle agents and old session cut-offs.

const (
	purgeBatch      = 500
	cutoffRetention = 10 * time.Minute
)

func (e *Engine) housekeepingInterval() time.Duration {
	return min(max(e.cfg.Retention/10, time.Second), time.Minute)
}

// scheduleHousekeeping arms the next run. Called with e.mu held or before
// the engine runs.
func (e *Engine) scheduleHousekeepingLocked() {
	if e.closed {
		return
	}
	e.housekeeper = e.clock.AfterFunc(e.housekeepingInterval(), e.housekeep)
}

func (e *Engine) housekeep() {
	now := e.now()
	before := now.Add(-e.cfg.Retention)
	ctx := context.Background()
	for {
		n, err := e.store.Purge(ctx, before, purgeBatch)
		if err != nil {
			e.log.Error("purge failed", "error", err)
			break
		}
		e.purged.Add(uint64(n))
		if n < purgeBatch {
			break
		}
	}
	// apply, not view: forgetting a cut-off deletes its setting, which a
	// commit writes.
	_, _ = e.apply(false, func(c *core) error {
		c.forgetIdleLocked(now)
		e.scheduleHousekeepingLocked()
		return nil
	})
}

// forgetIdleLocked forgets the session cut-offs past their retention and
// the agents with nothing live, queued, in flight or in their window.
func (c *core) forgetIdleLocked(now time.Time) {
	c.forgetCutoffsLocked(now)
	for id, a := range c.agents {
		if a.live == 0 && a.inflight == 0 && a.queued == 0 && a.window.total(now) == 0 {
			delete(c.agents, id)
		}
	}
}
