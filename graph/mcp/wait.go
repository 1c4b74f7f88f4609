// Waiting for a task: the call follows its task through the engine's event
// log (no polling), tells the client where it stands with progress
// notifications, and cancels it when the client cancels the call.

package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
)

// ended reports whether a call stops waiting for a task in state st: a
// terminal state, or PARKED (its retries are spent; only a reset moves it).
func ended(st engine.State) bool { return st.Terminal() || st == engine.StateParked }

// cancelReason is the reason of a task whose MCP call was cancelled.
const cancelReason = "cancelled by the MCP client"

// positionEvery bounds how often a queued call recomputes its place in its
// queue (O(queue) under the engine's lock) for its progress notifications
// while other tasks of its queue come and go; its own state changes are
// reported at once.
const positionEvery = 250 * time.Millisecond

// ProgressEvery is how often a waiting call that asked for progress (a
// progressToken) is told where its task stands even when nothing changed:
// a client whose request timeout restarts on progress (the TypeScript
// SDK's resetTimeoutOnProgress) keeps waiting for a task that queues or
// runs longer than its timeout (60 s by default there).
const ProgressEvery = 10 * time.Second

// progressEvery is ProgressEvery (the tests shorten it).
var progressEvery = ProgressEvery

// wait follows t from the event log's seq cursor (read before it was
// submitted, so no change is missed) until it ends. When ctx ends first,
// the task is cancelled.
//
// It reacts to its own task's events: each re-reads the task, as far as it
// is committed (engine.Engine.CommittedTask). While the task is queued and
// the client asked for progress, the events of its agent's queue of the
// lane move its place: then the task (and its place) is re-read at most
// once per positionEvery. When the client asked for progress, the task is
// also re-read and reported every progressEvery without news.
func (s *Server) wait(ctx context.Context, req *sdk.CallToolRequest, c *caller, t *engine.Task, cursor uint64) (*engine.Task, error) {
	// Close ends the wait (the engine's shutdown decides the task's fate).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.closed, stop)()
	defer s.opts.Engine.Follow(t.ID)()
	log := s.opts.Engine.Events()
	p := progress{req: req, taskID: t.ID}
	lane := t.Spec.Lane
	if lane == "" {
		lane = "main"
	}
	var buf []engine.Event
	for !ended(t.State) {
		p.report(ctx, t, s.describe(ctx, t, lane))
		placed := time.Now() // when t.Position was last computed
		own, moved := false, false
		for !own {
			// Wake up to report the new place once positionEvery has
			// passed since the last, when the queue moved, and to report
			// anyway every progressEvery; the task's own news may come
			// first.
			var wake time.Time
			if moved {
				wake = placed.Add(positionEvery)
			}
			if p.wanted() {
				if beat := p.sent.Add(progressEvery); wake.IsZero() || beat.Before(wake) {
					wake = beat
				}
			}
			wctx, stop := ctx, context.CancelFunc(nil)
			if !wake.IsZero() {
				if !time.Now().Before(wake) {
					break
				}
				wctx, stop = context.WithDeadline(ctx, wake)
			}
			err := log.Wait(wctx, cursor)
			if stop != nil {
				stop()
			}
			if err != nil {
				if !wake.IsZero() && ctx.Err() == nil {
					break // time to recompute the place, or to report anyway
				}
				if s.isClosing() {
					return nil, &engine.Error{Code: engine.CodeUnavailable, Retryable: true,
						Message: fmt.Sprintf("the server is shutting down; task %s is left to the engine (get_task or switchyard://tasks/%s says how it ends)", t.ID, t.ID)}
				}
				return s.cancel(ctx, c, t.ID)
			}
			evs, missed := log.Read(cursor, 1024, buf[:0])
			buf = evs
			own = missed > 0 // its own events may be among the missed
			for i := range evs {
				e := &evs[i]
				cursor = e.Seq
				if e.Type != engine.EventState {
					continue
				}
				if e.TaskID == t.ID {
					own = true
				} else if p.wanted() && t.State == engine.StateQueued && e.AgentID == t.Spec.AgentID && e.Lane == lane {
					moved = true
				}
			}
		}
		// Its own news, or (at most once per positionEvery) its new place:
		// as committed, so that the call never reports a state (above all
		// an end) that a crash would roll back.
		nt, err := s.opts.Engine.CommittedTask(ctx, t.ID)
		if err != nil {
			if ctx.Err() != nil {
				return s.cancel(ctx, c, t.ID)
			}
			return nil, fmt.Errorf("read task %s: %w", t.ID, err)
		}
		t = nt
	}
	return t, nil
}

// describe says where a waiting task stands.
func (s *Server) describe(ctx context.Context, t *engine.Task, lane string) string {
	var attempt engine.Attempt
	if n := len(t.Attempts); n > 0 {
		attempt = t.Attempts[n-1]
	}
	switch t.State {
	case engine.StateQueued:
		// As GraphQL's Task.position: the tasks ahead of it in its queue.
		msg := "queued in lane " + lane
		switch {
		case t.Position == 1:
			msg += ", 1 task ahead"
		case t.Position >= 0:
			msg += fmt.Sprintf(", %d tasks ahead", t.Position)
		}
		if ls, err := s.opts.Engine.Lane(ctx, lane); err == nil && ls.Config.Paused {
			msg += " (the lane is paused)"
		}
		return msg
	case engine.StateWaiting:
		return fmt.Sprintf("waiting for %d dependencies", t.Unmet)
	case engine.StateAssigned:
		if attempt.InstanceID != "" {
			return "dispatched to instance " + attempt.InstanceID
		}
		return "dispatched"
	case engine.StateRunning:
		if attempt.InstanceID != "" {
			return fmt.Sprintf("running on instance %s (attempt %d)", attempt.InstanceID, attempt.N)
		}
		return fmt.Sprintf("running (attempt %d)", attempt.N)
	case engine.StateRetryWait:
		return fmt.Sprintf("attempt %d failed (%s); retrying at %s", attempt.N, attempt.Error, t.NextRunAt.UTC().Format(time.RFC3339))
	}
	return t.State.String()
}

// cancel cancels the task of a call the client cancelled, and returns the
// task as committed after it (cancelled, or ended otherwise first), else a
// callCancelled error. The client is gone: the cancellation runs on a
// context of its own.
//
// The client expects no answer to a cancelled call, and the endpoint sends
// none (withhold); the task is what the call answers should the answer
// leave before the client's cancellation arrives: its id and its recorded
// reason, not the call's context error.
func (s *Server) cancel(ctx context.Context, c *caller, id string) (*engine.Task, error) {
	if s.isClosing() {
		// The server shuts down: the engine's drain decides.
		return nil, &engine.Error{Code: engine.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("the server is shutting down; task %s is left to the engine", id)}
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	reason, tool := cancelReason, "cancel (client)"
	if errors.Is(context.Cause(ctx), errSessionClosed) {
		// The client terminated the MCP session (DELETE): terminate.go.
		reason, tool = sessionClosedReason, "cancel (session closed)"
	}
	_, err := s.opts.Mutations.CancelTask(c.ctx(cctx), id, &reason)
	if err != nil && !engine.IsCode(err, engine.CodeConflict) {
		s.log.Warn("cancelling the task of a cancelled call", "task", id, "error", err)
	}
	s.record(c, tool, id, err)
	t, err := s.opts.Engine.CommittedTask(cctx, id)
	if err != nil || !ended(t.State) {
		return nil, &callCancelled{taskID: id, reason: reason}
	}
	return t, nil
}

// callCancelled is the error of a call the client cancelled whose task
// could not be read back.
type callCancelled struct{ taskID, reason string }

func (e *callCancelled) Error() string { return "task " + e.taskID + " " + e.reason }

// progress sends a call's progress notifications, when the client asked
// for them (a progress token): when the news changed, and at least every
// progressEvery. Each names the task ("task 01J…: running on instance local
// (attempt 1), 30 s"), so that a client that loses the call can find the
// task (get_task, list_tasks); the time is how long the task has been in
// that state (as the call saw it), once it is a second or more. The
// progress value counts the notifications.
type progress struct {
	req    *sdk.CallToolRequest
	taskID string
	n      float64
	last   string    // the news last sent
	sent   time.Time // when
	state  string    // the state (and attempt) last seen
	since  time.Time // since when
}

// wanted reports whether the client asked for progress notifications.
func (p *progress) wanted() bool { return p.req.Params.GetProgressToken() != nil }

func (p *progress) report(ctx context.Context, t *engine.Task, news string) {
	tok := p.req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	now := time.Now()
	if st := fmt.Sprintf("%s/%d", t.State, len(t.Attempts)); st != p.state {
		p.state, p.since = st, now
	}
	if news == p.last && now.Sub(p.sent) < progressEvery {
		return
	}
	p.last, p.sent = news, now
	p.n++
	msg := "task " + p.taskID + ": " + news
	if d := now.Sub(p.since); d >= time.Second {
		msg += fmt.Sprintf(", %d s", int(d.Seconds()))
	}
	_ = p.req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: p.n, Message: msg})
}
