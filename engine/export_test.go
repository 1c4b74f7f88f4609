package engine

import "time"

// SetLazyCommitDelay sets how long e's committer lets changes nobody waits
// for linger (lazyCommitDelay), for tests that tell lingering from not.
func SetLazyCommitDelay(e *Engine, d time.Duration) { e.lazyDelay = d }
