// Pull lanes: the worker calls (leaseTasks, renewLease, completeTask,
// failTask, releaseTask) and a task's lease.

package resolvers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/pull"
)

// Pull is the worker side of pull lanes (*pull.Manager).
type Pull interface {
	Lease(ctx context.Context, lane string, max int, leaseFor, wait time.Duration, worker string) ([]pull.Lease, error)
	Lookup(ctx context.Context, id string) (pull.Lease, error)
	Renew(ctx context.Context, id string, leaseFor time.Duration) (pull.Lease, error)
	Complete(ctx context.Context, id string, result json.RawMessage) (string, error)
	Fail(ctx context.Context, id, msg, code string, retryable bool) (string, error)
	Release(ctx context.Context, id, reason string) (string, error)
	Of(taskID string) (pull.Lease, bool)
}

var _ Pull = (*pull.Manager)(nil)

// worker returns the caller's identity if it may work the pull lane named
// lane, else the refusal.
func worker(ctx context.Context, lane string) (*auth.Identity, error) {
	id := auth.FromContext(ctx)
	if id == nil {
		return nil, &engine.Error{Code: model.CodeUnauthenticated, Message: auth.ErrUnauthenticated.Error()}
	}
	if !id.MayPull(lane) {
		if id.Role == auth.RoleWorker {
			return nil, forbidden("token %q works the lanes %v only, not %q", id.Name, id.Lanes, lane)
		}
		return nil, forbidden("token %q (%s) may not work pull lanes", id.Name, id.Role)
	}
	return id, nil
}

// pullError turns the manager's errors into the API's: a lost lease is
// LEASE_LOST with the way it ended.
func pullError(err error) error {
	var lost *pull.LostError
	if !errors.As(err, &lost) {
		return err
	}
	ext := map[string]any{"code": string(model.CodeLeaseLost), "leaseState": string(lost.End), "retryable": false}
	if lost.TaskID != "" {
		ext["taskId"] = lost.TaskID
	}
	return &gqlerror.Error{Message: lost.Error(), Extensions: ext}
}

func (m *mutationResolver) pull() (Pull, error) {
	if m.opts.Pull == nil {
		return nil, notAvailable("pull lanes are")
	}
	return m.opts.Pull, nil
}

func (m *mutationResolver) LeaseTasks(ctx context.Context, lane string, max int, leaseForMs int, waitMs int) ([]*model.Lease, error) {
	p, err := m.pull()
	if err != nil {
		return nil, err
	}
	if !validName(lane) {
		return nil, invalid("lane", "%q is not a lane name", lane)
	}
	id, err := worker(ctx, lane)
	if err != nil {
		return nil, err
	}
	leases, err := p.Lease(ctx, lane, max, time.Duration(leaseForMs)*time.Millisecond, time.Duration(waitMs)*time.Millisecond, id.Name)
	if err != nil {
		return nil, pullError(err)
	}
	out := make([]*model.Lease, 0, len(leases))
	for _, l := range leases {
		// The leases are committed; the task is shown as committed too
		// (engine.Engine.CommittedTask), should it have moved on since.
		t, err := m.eng.CommittedTask(ctx, l.TaskID)
		if err != nil {
			return nil, err
		}
		out = append(out, &model.Lease{LeaseID: l.ID, LeaseExpiresAt: l.ExpiresAt, Attempt: l.Attempt, Task: model.NewTask(t)})
	}
	return out, nil
}

// held returns the live lease named leaseID, if the caller may work its
// lane.
func (m *mutationResolver) held(ctx context.Context, p Pull, leaseID string) error {
	l, err := p.Lookup(ctx, leaseID)
	if err != nil {
		return pullError(err)
	}
	_, err = worker(ctx, l.Lane)
	return err
}

// heldOrEnded is held for completeTask and failTask, which may be resent
// after their lease ended (pull.Manager.Complete answers a resend as the
// first call, from what the task records): a lease its worker ended, or one
// this node does not know (a restart, another leader), is checked against
// the lane of the task its id names, and the manager decides.
func (m *mutationResolver) heldOrEnded(ctx context.Context, p Pull, leaseID string) error {
	l, err := p.Lookup(ctx, leaseID)
	if err == nil {
		_, err = worker(ctx, l.Lane)
		return err
	}
	var lost *pull.LostError
	if !errors.As(err, &lost) || lost.End != pull.EndCompleted && lost.End != pull.EndFailed && lost.End != pull.EndUnknown {
		return pullError(err)
	}
	taskID, _, _ := strings.Cut(leaseID, ".")
	t, terr := m.eng.Task(ctx, taskID)
	if terr != nil {
		return pullError(err) // no such task: the lease is lost, as it says
	}
	_, err = worker(ctx, t.Spec.Lane)
	return err
}

func (m *mutationResolver) RenewLease(ctx context.Context, leaseID string, leaseForMs int) (*model.Lease, error) {
	p, err := m.pull()
	if err != nil {
		return nil, err
	}
	if err := m.held(ctx, p, leaseID); err != nil {
		return nil, err
	}
	l, err := p.Renew(ctx, leaseID, time.Duration(leaseForMs)*time.Millisecond)
	if err != nil {
		return nil, pullError(err)
	}
	t, err := m.eng.CommittedTask(ctx, l.TaskID)
	if err != nil {
		return nil, err
	}
	return &model.Lease{LeaseID: l.ID, LeaseExpiresAt: l.ExpiresAt, Attempt: l.Attempt, Task: model.NewTask(t)}, nil
}

// ended answers a call that ended a lease with the task as it now stands,
// as far as that is committed (engine.Engine.CommittedTask): the end itself
// is (pull.Manager.Complete), but the task may have moved on since (a
// retry's backoff ended, another worker leased it) in a change not yet
// committed.
func (m *mutationResolver) ended(ctx context.Context, leaseID, taskID string, err error) (*model.LeaseEndPayload, error) {
	if err != nil {
		return nil, pullError(err)
	}
	t, err := m.eng.CommittedTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return &model.LeaseEndPayload{LeaseID: leaseID, Task: model.NewTask(t)}, nil
}

func (m *mutationResolver) CompleteTask(ctx context.Context, leaseID string, result json.RawMessage) (*model.LeaseEndPayload, error) {
	p, err := m.pull()
	if err != nil {
		return nil, err
	}
	if err := m.heldOrEnded(ctx, p, leaseID); err != nil {
		return nil, err
	}
	taskID, err := p.Complete(ctx, leaseID, result)
	return m.ended(ctx, leaseID, taskID, err)
}

func (m *mutationResolver) FailTask(ctx context.Context, leaseID string, msg string, retryable bool, code *string) (*model.LeaseEndPayload, error) {
	p, err := m.pull()
	if err != nil {
		return nil, err
	}
	if err := m.heldOrEnded(ctx, p, leaseID); err != nil {
		return nil, err
	}
	taskID, err := p.Fail(ctx, leaseID, msg, deref(code), retryable)
	return m.ended(ctx, leaseID, taskID, err)
}

func (m *mutationResolver) ReleaseTask(ctx context.Context, leaseID string, reason *string) (*model.LeaseEndPayload, error) {
	p, err := m.pull()
	if err != nil {
		return nil, err
	}
	if err := m.held(ctx, p, leaseID); err != nil {
		return nil, err
	}
	taskID, err := p.Release(ctx, leaseID, deref(reason))
	return m.ended(ctx, leaseID, taskID, err)
}

func (r *taskResolver) Lease(_ context.Context, obj *model.Task) (*model.TaskLease, error) {
	if r.opts.Pull == nil || !obj.T.State.InFlight() {
		return nil, nil
	}
	l, ok := r.opts.Pull.Of(obj.T.ID)
	if !ok {
		return nil, nil
	}
	out := &model.TaskLease{Attempt: l.Attempt, ExpiresAt: l.ExpiresAt}
	if l.Worker != "" {
		out.Worker = &l.Worker
	}
	// The lease was made when its attempt was assigned and started: one
	// instant, recorded with the attempt (so also for a lease resumed after
	// a restart), where the manager's own time is when the worker's call
	// answered, after the lease's commit.
	at := l.LeasedAt
	if n := l.Attempt; n >= 1 && n <= len(obj.T.Attempts) && !obj.T.Attempts[n-1].StartedAt.IsZero() {
		at = obj.T.Attempts[n-1].StartedAt
	}
	if !at.IsZero() {
		out.LeasedAt = &at
	}
	return out, nil
}

// holder is the engine's HoldOf; an engine without it (a node of a cluster
// that does not lead) shows no holds.
type holder interface {
	HoldOf(id string) (engine.Hold, bool)
}

func (r *taskResolver) Hold(_ context.Context, obj *model.Task) (*model.TaskHold, error) {
	h, ok := r.eng.(holder)
	if !ok || obj.T.State != engine.StateQueued {
		return nil, nil
	}
	hold, ok := h.HoldOf(obj.T.ID)
	if !ok {
		return nil, nil
	}
	out := &model.TaskHold{Policy: hold.Policy, Lane: hold.Lane, Since: hold.Since, Reason: hold.Reason()}
	if !hold.ReaskAt.IsZero() {
		out.ReaskAt = &hold.ReaskAt
	}
	return out, nil
}
