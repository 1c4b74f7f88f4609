package engine

// ObserveCommits makes e call f with the outcome of every commit attempt
// from now on, once the engine has recorded it (nil: it succeeded), so that
// a test waits for a commit instead of polling. f runs on the committer's
// goroutine and must not block.
func ObserveCommits(e *Engine, f func(error)) { e.commitHealth.observe.Store(&f) }

// IdleCommits returns how often the committer woke up to find nothing to
// write.
func IdleCommits(e *Engine) uint64 { return e.stats.idleCommits.Load() }

// Rounds returns how many rounds of dispatch the engine has run.
func Rounds(e *Engine) uint64 {
	var n uint64
	e.view(func(c *core) { n = c.stats.rounds })
	return n
}

// StrandAgentQueues breaks the engine's bookkeeping for tests of what a
// broken invariant does: agent id's count of slots held is set to its
// ceiling, and it forgets its queues, so that admission refuses its heads
// and parking it takes none of them off the lanes' heaps. The returned
// function puts both back.
func StrandAgentQueues(e *Engine, id string) (restore func()) {
	var a *agent
	var queues []*agentQueue
	var inflight int
	e.view(func(c *core) {
		a = c.agents[id]
		queues, inflight = a.queues, a.inflight
		a.queues, a.inflight = nil, a.limit
	})
	return func() {
		e.view(func(c *core) {
			a.queues, a.inflight = queues, inflight
			c.agentChangedLocked(a)
		})
	}
}

// Live reports whether task id is in the engine's memory (not yet
// forgotten: the store answers for a task that has left it).
func Live(e *Engine, id string) bool {
	var live bool
	e.view(func(c *core) { live = c.tasks[id] != nil })
	return live
}
