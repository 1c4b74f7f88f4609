package engine

import "context"

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
// unknown) needs nothing. A follower reads the task with CommittedTask, and
// follows it before its first read: an end that read waits for is then
// written at once too.
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

// CommittedTask returns a task as Task does, but never a change the store
// has not committed: a follower's read (the task(id) subscription, an MCP
// call waiting for its task), which must not show a state that a crash
// would roll back. The engine's memory runs ahead of the store — a change
// waits in the pending batch, or is in the store's hands — so when the
// task's snapshot shows such a change, CommittedTask waits for the commit
// that holds it. It then answers with the task as it is once that commit
// has landed if nothing since needs another commit (the commit may have
// taken later changes along: an attempt's start and end) and it is still
// in memory (a followed task is), else with the snapshot it waited for: it
// does not chase a task that keeps changing.
//
// It asks for no commit of its own: the change is written when it would
// have been — within lazyCommitDelay, an attempt's start within
// runningCommitDelay, a followed task's end at once (Follow) — so that
// followers never split an attempt's start and end into two transactions.
// A snapshot whose changes are all committed, a task only in the store,
// and any task with a store that is not durable (whose commits make
// nothing durable) are returned at once.
//
// When the commit fails, or is not confirmed within Config.CommitTimeout,
// or ctx ends first, it answers UNAVAILABLE, never the snapshot.
func (e *Engine) CommittedTask(ctx context.Context, id string) (*Task, error) {
	snap, w := e.committedSnapshot(id)
	switch {
	case snap == nil:
		return e.storedTask(ctx, id)
	case w.lost:
		return nil, &Error{Code: CodeUnavailable, Retryable: true, Message: "the latest change of task " + id + " was not committed"}
	case w.batch == nil:
		return snap, nil
	}
	if w.pending && e.sync {
		e.commitNow()
	}
	ended, err := e.waitCommitted(ctx, commitWait{latest: w.batch})
	switch {
	case !ended:
		return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "the latest change of task " + id + " was not confirmed committed"}
	case err != nil:
		return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "the latest change of task " + id + " could not be committed"}
	}
	if now, w := e.committedSnapshot(id); now != nil && w.batch == nil && !w.lost {
		return now, nil
	}
	return snap, nil
}

// snapshotWait is what a snapshot of a task in memory waits for before it
// may be shown (CommittedTask).
type snapshotWait struct {
	batch   *pendingBatch // the batch whose commit makes it durable; nil: it is
	pending bool          // batch is the pending batch
	lost    bool          // a change it shows was in a batch the store did not take
}

// committedSnapshot takes a snapshot of task id when it is in memory, and
// says which commit it waits for.
func (e *Engine) committedSnapshot(id string) (snap *Task, w snapshotWait) {
	e.view(func(c *core) {
		t := c.tasks[id]
		if t == nil {
			return
		}
		snap = c.liveSnapshotLocked(t)
		if !e.durable {
			return
		}
		switch {
		case t.dirty:
			// Its latest change waits in the pending batch (the batches
			// before it end first).
			w.batch, w.pending = e.pending, true
		case t.lastSeq > e.committed.Load():
			// Swapped out, not committed yet: in the store's hands, or
			// refused (the engine was fenced off, or stopped while the
			// store failed).
			w.batch, w.lost = e.committing, e.committing == nil
		case e.committing != nil && e.committing.quiet:
			// It may hold a change of this task that its lastSeq does not
			// show: wait for it (rare: a dependency met, a webhook
			// delivery).
			w.batch = e.committing
		}
	})
	return snap, w
}
