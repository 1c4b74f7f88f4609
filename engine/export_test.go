package engine

// ObserveCommits makes e call f with the outcome of every commit attempt
// from now on, once the engine has recorded it (nil: it succeeded), so that
// a test waits for a commit instead of polling. f runs on the committer's
// goroutine and must not block.
func ObserveCommits(e *Engine, f func(error)) { e.commitHealth.observe.Store(&f) }
