package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// Executor carries out attempts: it forwards a task to a browser instance (or
// pretends to, in tests and benchmarks).
type Executor interface {
	// Start begins an attempt and returns promptly, without waiting for the
	// work: it may be called on the goroutine of the API call that made the
	// dispatch possible (a submission, a completion). The executor reports on run: Started when the work has reached an
	// instance, then Finish exactly once. ctx (the run itself) carries the
	// attempt's deadline and is cancelled when the task is cancelled, times
	// out or the engine shuts down; the executor should stop the work then
	// and Finish.
	Start(ctx context.Context, run *Run)
}

// Outcome is how an attempt ended.
type Outcome struct {
	Result     json.RawMessage   // the instance's answer, on success
	Err        error             // nil on success
	Class      policy.ErrorClass // for Err; derived from Err with ClassOf when zero
	HTTPStatus int               // the instance's status code, when there was one
	// Code is a short machine-readable code of Err, when the executor has
	// one; a retry policy sees it (policy.Details.ErrorCode). Empty means
	// the first ErrorCoder in Err's chain, or one the engine makes.
	Code       string
	InstanceID string // where it ran, if not reported by Started
	TabID      string // the tab it ran in; binds the task's session to it
	// TabTime and ActionTime are the attempt's two parts as the executor
	// measured them: finding or opening its tab, then the action at the
	// instance (Attempt.TabTime, Attempt.ActionTime).
	TabTime    time.Duration
	ActionTime time.Duration
	// Release hands the task back instead of ending it: it queues again at
	// once and the attempt does not count against its retry budget (Err, if
	// set, says why); handed back at or past its deadline, it expires at
	// once from the queue. A pull lane's worker releases what it will not do.
	Release bool
	// Final fails the task at once with Err, without asking its retry
	// policy: a pull-lane worker's failTask(retryable: false).
	Final bool
	// ByWorker marks the outcome of a pull lane's worker's own call
	// (completeTask, failTask, releaseTask), as package pull finishes it:
	// the attempt records its worker as its ender (Attempt.EndedBy). An
	// outcome made for the worker's lease (it expired, the task was
	// cancelled) is the engine's; on a pushed lane the flag is ignored.
	ByWorker bool
}

// Run is the executor's handle on one attempt of a task.
type Run struct {
	ctx      runCtx
	owner    runOwner // the Engine that drives the core, or a bare Core
	task     *task
	spec     *TaskSpec
	id       string
	lease    uint64
	attempt  int
	instance string
	tab      string
	lost     *lostTab // the session's tab is lost (LostSession); nil mostly, which keeps a Run within 192 bytes
	done     atomic.Bool
	// ended: the attempt ended at its timeout (core lock); the executor's
	// return only releases its slot.
	ended bool
}

// TaskID returns the task's id.
func (r *Run) TaskID() string { return r.id }

// Spec returns the task's spec (read-only).
func (r *Run) Spec() *TaskSpec { return r.spec }

// Attempt returns the attempt's number, from 1.
func (r *Run) Attempt() int { return r.attempt }

// LeaseID returns the attempt's lease id.
func (r *Run) LeaseID() uint64 { return r.lease }

// InstanceID returns the instance the engine placed the attempt on: the task's
// own target, its session's bound instance, or the least-loaded healthy
// instance; "" when the engine manages no instances.
func (r *Run) InstanceID() string { return r.instance }

// TabID returns the tab the attempt should run in: the task's own, or the one
// bound to its session by an earlier task; "" when a tab must be opened.
func (r *Run) TabID() string { return r.tab }

// LostSession reports that the attempt's session lost its tab (TabID), on
// instance instanceID: the instance was removed, or a task of another session
// closed the tab (LostReason says which). The page the
// session built is gone: the executor should not run the attempt, but fail it
// with a permanent error wrapping ErrInstanceGone (the executor's
// SESSION_LOST), which unbinds the session. Such an attempt is placed on no
// instance and holds no instance slot.
func (r *Run) LostSession() (instanceID string, lost bool) {
	if r.lost == nil {
		return "", false
	}
	return r.lost.instance, r.lost.instance != ""
}

// lostTab is where a session's lost tab was, and how it was lost.
type lostTab struct {
	instance string // the instance the tab was on
	why      string // how it was lost; "" when its instance was removed
}

// LostReason says, when LostSession reports a lost tab, how it was lost:
// "its instance was removed", or "closed by …" when a task of another
// session closed it (Engine.TabClosed).
func (r *Run) LostReason() string {
	if r.lost == nil || r.lost.why == "" {
		return "its instance was removed"
	}
	return r.lost.why
}

// Started records that the work has reached an instance: the task moves from
// ASSIGNED to RUNNING. Calling it is optional and only the first call counts.
func (r *Run) Started(instanceID, tabID string) {
	r.owner.started(r, instanceID, tabID)
}

// Finish ends the attempt. Only the first call counts; the engine ignores (and
// records) a finish that arrives after the lease was reclaimed.
func (r *Run) Finish(o Outcome) {
	if r.done.Swap(true) {
		return
	}
	if o.Err != nil && o.Class == policy.ClassNone {
		o.Class = ClassOf(o.Err)
	}
	r.owner.finish(r, o)
}

// ExecutorFunc adapts a blocking function to an Executor: each attempt runs in
// its own goroutine and its return value finishes the attempt.
type ExecutorFunc func(ctx context.Context, run *Run) Outcome

// Start implements Executor.
func (f ExecutorFunc) Start(ctx context.Context, run *Run) {
	go func() { run.Finish(f(ctx, run)) }()
}

// NoopExecutor succeeds at once, without doing anything. It finishes inside
// Start, which makes it the executor of choice for benchmarks of the engine.
type NoopExecutor struct{}

// Start implements Executor.
func (NoopExecutor) Start(_ context.Context, run *Run) {
	run.Finish(Outcome{})
}

// ClassifiedError is an error that knows whether retrying may help.
type ClassifiedError struct {
	Class      policy.ErrorClass
	HTTPStatus int
	Err        error
}

func (e *ClassifiedError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ClassifiedError) Unwrap() error { return e.Err }

// Transient marks err as worth retrying.
func Transient(err error) error {
	return &ClassifiedError{Class: policy.ClassTransient, Err: err}
}

// Permanent marks err as final: retrying cannot help.
func Permanent(err error) error {
	return &ClassifiedError{Class: policy.ClassPermanent, Err: err}
}

// Transientf formats a transient error.
func Transientf(format string, args ...any) error { return Transient(fmt.Errorf(format, args...)) }

// Permanentf formats a permanent error.
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// ClassOf classifies err: the class of a ClassifiedError in its chain;
// cancellation as cancelled; a deadline as transient (a timeout); anything
// else as transient, because an unknown failure deserves the retry budget.
func ClassOf(err error) policy.ErrorClass {
	if err == nil {
		return policy.ClassNone
	}
	var ce *ClassifiedError
	if errors.As(err, &ce) {
		return ce.Class
	}
	if errors.Is(err, context.Canceled) {
		return policy.ClassCancelled
	}
	return policy.ClassTransient
}

// ErrInstanceGone is the error (wrapped, with errors.Is) an executor reports
// when the instance an attempt needed no longer exists or stopped answering.
// The engine then forgets the session's tab binding, so that a retry of a task
// that named no tab runs in a fresh tab on a healthy instance.
var ErrInstanceGone = errors.New("instance gone")

// ErrInstanceFault is the error (wrapped, with errors.Is) an executor reports
// when an attempt ended because of its instance rather than its task: the
// instance was gone, unreachable, restarting, shutting down or refused the
// credentials. Such an attempt is recorded with the instance's own reason
// (prefixed "instance fault: ", and Attempt.InstanceFault set) but does not consume the task's attempt
// budget: the task is retried after Config.InstanceFaultDelay, up to
// Config.InstanceFaultBudget such attempts; beyond that they count like any
// transient failure, so that nothing waits for ever on a dead fleet. The one
// exception is a fault after which the action may have run (ErrMayHaveRun)
// on a task that allows a single attempt: it counts.
var ErrInstanceFault = errors.New("instance fault")

// ErrMayHaveRun is the error an executor wraps next to ErrInstanceFault (both
// with errors.Is) when the instance failed after the attempt's request
// reached it, so that the action may have run: the connection broke or its
// answer never came once the request was sent (the instance died
// mid-action), or a server in front of the browser lost it while the
// request may have been with it. A task whose retry policy allows a single
// attempt (RetryPolicy.MaxAttempts 1) is promised that its action runs at
// most once: for it, such an attempt is not forgiven — it counts like any
// failure (Attempt.InstanceFault is false), and the task ends as its
// exhausted setting says, with a reason that says the action may have run
// and was not repeated. For a task allowed more attempts, which accepts that
// its action may run again (a timeout after the action ran is retried too),
// it is an instance fault like any other. Faults that certainly did not
// reach the instance's browser (a refused connection, a 401, a draining
// instance's 503) carry only ErrInstanceFault, and are forgiven for every
// task.
var ErrMayHaveRun = errors.New("after the request was sent")

// InstanceInfo is what the engine knows of a browser instance: enough to place
// tasks on it and to enforce its capacity as a ceiling.
type InstanceInfo struct {
	ID       string
	Capacity int  // concurrent attempts it accepts; 0 means unlimited
	Healthy  bool // unhealthy instances receive no new work
	// Chat marks a chat-style instance: it runs instruction tasks, and only
	// those; browser instances run action tasks.
	Chat bool
}

// InstanceSink receives the instance registry's view of the fleet. The Engine
// implements it. Its sessions are named by their scope
// (TaskSpec.SessionScope), which tells one agent's session from another's of
// the same name.
type InstanceSink interface {
	// SetInstance adds or updates an instance.
	SetInstance(InstanceInfo)
	// RemoveInstance forgets an instance; tasks bound to it are placed again.
	RemoveInstance(id string)
	// UnbindSession forgets the tab bound to a session (its tab was closed),
	// so that the session's next task opens a new one.
	UnbindSession(sessionKey string)
	// TabClosed says that a task (of session bySession, or "") closed a tab:
	// other sessions bound to it lost their page (Engine.TabClosed).
	TabClosed(instanceID, tabID, bySession, closedBy string)
	// ExpireSession drops a session's binding to a tab the executor closed
	// after its idle timeout, and says so (Engine.ExpireSession).
	ExpireSession(sessionKey, tabID, reason string)
}
