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
