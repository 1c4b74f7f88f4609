package engine

import (
	"context"
	"sync"
	"time"
)

// A Run is also its attempt's context: it reports the attempt's deadline and
// is cancelled by the engine — on cancellation of the task, when the attempt
// times out on the engine's clock, or at shutdown. Making the run the context
// spares the dispatcher a context allocation per attempt and keeps timeouts
// under the engine's (possibly fake) clock.

type runCtx struct {
	mu       sync.Mutex
	deadline time.Time
	done     chan struct{} // created on first use
	err      error
	cause    error
	after    map[*afterFunc]struct{}
}

type afterFunc struct {
	once sync.Once
	f    func()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Deadline implements context.Context: the attempt's timeout, or the task's
// deadline if earlier.
func (r *Run) Deadline() (time.Time, bool) {
	r.ctx.mu.Lock()
	defer r.ctx.mu.Unlock()
	return r.ctx.deadline, true
}

// Done implements context.Context.
func (r *Run) Done() <-chan struct{} {
	r.ctx.mu.Lock()
	defer r.ctx.mu.Unlock()
	if r.ctx.done == nil {
		if r.ctx.err != nil {
			return closedChan
		}
		r.ctx.done = make(chan struct{})
	}
	return r.ctx.done
}

// Err implements context.Context: context.DeadlineExceeded when the attempt
// timed out, context.Canceled otherwise.
func (r *Run) Err() error {
	r.ctx.mu.Lock()
	defer r.ctx.mu.Unlock()
	return r.ctx.err
}

// Value implements context.Context; a run carries no values.
func (r *Run) Value(any) any { return nil }

// Cause returns why the attempt's context ended: a *CancelledError with the
// reason when the task was cancelled, or nil while it runs.
func (r *Run) Cause() error {
	r.ctx.mu.Lock()
	defer r.ctx.mu.Unlock()
	return r.ctx.cause
}

// AfterFunc arranges for f to run in its own goroutine once the context ends.
// It lets contexts derived from a run (context.WithCancel(run)) follow it
// without a goroutine each.
func (r *Run) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	r.ctx.mu.Lock()
	if r.ctx.err != nil {
		r.ctx.mu.Unlock()
		a.once.Do(func() { go f() })
		return func() bool { return false }
	}
	if r.ctx.after == nil {
		r.ctx.after = map[*afterFunc]struct{}{}
	}
	r.ctx.after[a] = struct{}{}
	r.ctx.mu.Unlock()
	return func() bool {
		stopped := false
		a.once.Do(func() { stopped = true })
		r.ctx.mu.Lock()
		delete(r.ctx.after, a)
		r.ctx.mu.Unlock()
		return stopped
	}
}

// cancel ends the run's context; only the first call counts.
func (r *Run) cancel(err, cause error) {
	r.ctx.mu.Lock()
	if r.ctx.err != nil {
		r.ctx.mu.Unlock()
		return
	}
	r.ctx.err, r.ctx.cause = err, cause
	if r.ctx.done != nil {
		close(r.ctx.done)
	}
	after := r.ctx.after
	r.ctx.after = nil
	r.ctx.mu.Unlock()
	for a := range after {
		a.once.Do(func() { go a.f() })
	}
}

var _ context.Context = (*Run)(nil)
