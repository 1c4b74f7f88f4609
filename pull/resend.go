package pull

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

// Resent completions and failures. A worker's completeTask or failTask may
// end its lease and still answer with an error: the connection broke after
// the commit, the node it called gave up waiting for the leader's answer,
// the commit's confirmation failed though the store took it. Such an error
// says "retry", and the worker resends the same call with the same lease.
// That call repeats the first one's answer when the lease's attempt is
// recorded as ended by its worker the same way: completed with the same
// result (as JSON values: key order and spacing do not count), or failed
// with the same error, code and retryable. A resend that differs is a
// CONFLICT naming the first field that differs, as an idempotency key reused
// with a different request is. A lease that ended otherwise (expired,
// released, cancelled, stopped by the server) is LEASE_LOST as before.
//
// What is compared is the task as the engine records it (its attempt, whose
// lease the lease id's signature covers, and its result), not the manager's
// memory: it survives a restart, and the leader a cluster's nodes forward
// worker calls to answers it the same after a change of leader. The
// attempt records who ended it (engine.Attempt.EndedBy: the worker's call
// finishes its run with Outcome.ByWorker), which tells a worker's failure
// with a code the engine also gives (timeout, lease_expired, restart,
// instance_fault) from the engine's own. Only an attempt ended before the
// stores kept its ender (a build before it) is told apart by its code: a
// failure with an engine's code is then the worker's only when it is
// resent the same, and a resend that differs is LEASE_LOST.

// resent answers a completion (end EndCompleted) or failure (EndFailed) of
// the lease named id, which is not held (lost, why): the recorded end of
// the lease's attempt when it is the same as o, a CONFLICT when the worker
// ended it otherwise, else lost. The record decides, not the manager's
// memory of how the lease ended, which a restart or a change of leader
// loses.
func (m *Manager) resent(ctx context.Context, id string, end End, o engine.Outcome, lost error) (string, error) {
	var le *LostError
	if end != EndCompleted && end != EndFailed || !errors.As(lost, &le) {
		return "", lost
	}
	taskID, n, ok := parseID(id)
	if !ok {
		return "", lost
	}
	t, err := m.eng.Task(ctx, taskID)
	var ee *engine.Error
	switch {
	case errors.As(err, &ee) && ee.Code == engine.CodeNotFound:
		return "", lost
	case err != nil:
		return "", fmt.Errorf("pull: read task %s for a resent %s: %w", taskID, strings.ToLower(string(end)), err)
	case n > len(t.Attempts):
		return "", lost
	}
	att := t.Attempts[n-1]
	if att.N != n || att.EndedAt.IsZero() || !hmac.Equal([]byte(m.signAttempt(taskID, n, att.LeaseID)), []byte(id)) {
		return "", lost
	}
	recorded, sure, ok := workerEnd(t, att)
	if !ok {
		return "", lost
	}
	if field, why := outcomeDiffers(t, att, recorded, end, o); field != "" {
		if !sure {
			// Recorded without its ender, with a code the engine
			// ends attempts with too (an expired lease, a restart):
			// only a resend that repeats the record is taken as the
			// worker's.
			return "", lost
		}
		return "", &engine.Error{Code: engine.CodeConflict, Field: field, TaskID: taskID,
			Message: fmt.Sprintf("attempt %d of task %s was already ended by its worker with a different outcome (%s): a resent call must repeat the first one", n, taskID, why)}
	}
	// The first call may have answered before its end was durable: this
	// answer waits for that, as the first one did.
	if err := m.eng.Sync(ctx); err != nil {
		return taskID, err
	}
	m.log.Debug("a resent lease end repeats the recorded one", "task", taskID, "attempt", n, "end", end)
	return taskID, nil
}

// parseID splits a lease id into its task and attempt.
func parseID(id string) (taskID string, n int, ok bool) {
	taskID, rest, ok := strings.Cut(id, ".")
	if !ok {
		return "", 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return taskID, n, true
}

// workerEnd says how the worker ended the attempt att of t, as the task
// records it: completed (the task's last attempt, and the task SUCCEEDED,
// so that its result is the attempt's) or failed by failTask. ok is false
// for an attempt the worker did not end so: one the engine ended (expired,
// cancelled, interrupted), one handed back, or a success the task has
// moved past (it was run again). sure is false when the record cannot say
// the end was the worker's: an attempt ended before the stores kept who
// ended it (att.EndedBy unknown) that failed with a code the engine also
// gives (lease_expired, timeout, restart, instance_fault), as a worker's
// failTask may (plugins/ABI.md names these codes for retry policies to
// read).
func workerEnd(t *engine.Task, att engine.Attempt) (end End, sure, ok bool) {
	switch att.EndedBy {
	case engine.EndedByWorker, engine.EndedByUnknown:
	default:
		return "", false, false
	}
	switch att.Class {
	case policy.ClassNone:
		if att.Error == "" && att.N == len(t.Attempts) && t.State == engine.StateSucceeded {
			return EndCompleted, true, true
		}
	case policy.ClassTransient, policy.ClassPermanent:
		switch {
		case att.InstanceFault, strings.HasPrefix(att.Error, "released: "):
		case att.EndedBy == engine.EndedByWorker:
			return EndFailed, true, true
		case att.Code == engine.CodeLeaseExpired, att.Code == engine.CodeTimeout,
			att.Code == engine.CodeRestart, att.Code == engine.CodeInstanceFault:
			return EndFailed, false, true
		default:
			return EndFailed, true, true
		}
	}
	return "", false, false
}

// outcomeDiffers returns the first field in which the outcome o of a call
// that would end the lease with end differs from the recorded end of att
// ("" when it is the same), and how.
func outcomeDiffers(t *engine.Task, att engine.Attempt, recorded, end End, o engine.Outcome) (field, why string) {
	if recorded != end {
		return "leaseId", fmt.Sprintf("it was %s, not %s", strings.ToLower(string(recorded)), strings.ToLower(string(end)))
	}
	if end == EndCompleted {
		if !SameResult(t.Result, o.Result) {
			return "result", "another result"
		}
		return "", ""
	}
	msg := ""
	if o.Err != nil {
		msg = o.Err.Error()
	}
	switch {
	case att.Error != msg:
		return "error", "another error"
	case att.Code != o.Code:
		return "code", fmt.Sprintf("code %q, not %q", att.Code, o.Code)
	case (att.Class == policy.ClassPermanent) != o.Final:
		return "retryable", fmt.Sprintf("retryable %t, not %t", att.Class != policy.ClassPermanent, !o.Final)
	}
	return "", ""
}

// SameResult reports whether two results are the same JSON value: key
// order, spacing and the spelling of a number (1e2, 100, 100.0: compared
// exactly as integers, else as float64) do not count, and none is null.
func SameResult(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	x, okx := decodeResult(a)
	y, oky := decodeResult(b)
	return okx && oky && sameValue(x, y)
}

// decodeResult decodes a result, its numbers as written; none is null.
func decodeResult(raw json.RawMessage) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, true
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// sameValue compares decoded JSON values, numbers by value.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		if !strings.ContainsAny(string(x)+string(y), ".eE") {
			p, okp := new(big.Int).SetString(string(x), 10)
			q, okq := new(big.Int).SetString(string(y), 10)
			return okp && okq && p.Cmp(q) == 0
		}
		p, errp := x.Float64()
		q, errq := y.Float64()
		return errp == nil && errq == nil && p == q
	default: // string, bool, nil
		return a == b
	}
}
