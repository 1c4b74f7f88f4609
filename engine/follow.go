package engine

// Follow records that a client follows task id until it ends — a task(id)
// subscription, an MCP call waiting for its task — and returns the function
// that stops following (calling it more than once is harmless).
//
// With a durable store, a change nobody waits for lingers up to
// lazyCommitDelay so that it rides in the next commit someone does wait for
// (usually the next submission's) instead of costing a transaction of its
// own. A followed task's end is written at once instead, so that it reaches
// its follower without that wait, whatever ended it — its attempt, its
// deadline, a cancellation, a dependency's cascade: the batch that holds it
// asks the committer for an immediate commit (changes.followedEnd, read by
// Engine.unlock). Once its end is committed, the task stays in memory until
// its last follower stops (forgetLocked), so that the follower's read of it
// is not a query of the store. A task not in memory (ended and forgotten, or
// unknown) needs nothing.
func (e *Engine) Follow(id string) (unfollow func()) {
	var t *task
	ended := false
	e.view(func(c *core) {
		if t = c.tasks[id]; t != nil {
			t.followers++
			ended = t.state.Terminal() && t.dirty // it ended while its follower was on the way
		}
	})
	if t == nil {
		return func() {}
	}
	if ended {
		e.commitSoon()
	}
	done := false
	return func() {
		e.view(func(c *core) {
			if !done {
				done = true
				t.followers--
				if t.followers == 0 && t.forgetLater {
					// Its end was committed while followed: forgotten now,
					// as the commit would have.
					c.forgetLocked(t)
				}
			}
		})
	}
}
