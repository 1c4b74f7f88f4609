package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/pull"
	"github.com/switchyard/switchyard/schedule"
)

// Calls from any node to the leader. An operation is applied directly when
// this node leads; otherwise it is written to the store's command table as
// JSON, the leader applies it and writes the result back. Operations are
// applied at least once (a leader that dies between applying and answering
// leaves the command to its successor), so each one is idempotent: a
// submission carries the ids its accepting node chose, and applying it again
// yields the same tasks.

// leader is what the leader applies operations to.
type leader struct {
	eng       *engine.Engine
	reg       *executor.Registry
	plugins   *manager.Manager
	schedules *schedule.Scheduler
	pull      *pull.Manager
	checks    *heartbeat.Checker
}

// op is one operation: its command kind, and how the leader applies it.
type op[A, R any] struct {
	kind  string
	apply func(ctx context.Context, l *leader, args A) (R, error)
}

// call applies the operation on the leader: here, or through the store.
func (o op[A, R]) call(ctx context.Context, n *Node, args A) (R, error) {
	if l := n.leader(); l != nil {
		return o.apply(ctx, l, args)
	}
	var res R
	payload, err := json.Marshal(args)
	if err != nil {
		return res, fmt.Errorf("cluster: encode %s: %w", o.kind, err)
	}
	raw, err := n.command(ctx, o.kind, withRequestID(payload, requestid.ID(ctx)))
	if mutates(o.kind) {
		n.reads.invalidate() // whatever happened, this node's next read asks again
	}
	if errors.Is(err, errTookOver) {
		// This node took over while the read waited for the old leader:
		// it serves the read itself (or, deposed again at once, asks
		// whoever leads now).
		return o.call(ctx, n, args)
	}
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("cluster: decode the answer to %s: %w", o.kind, err)
	}
	return res, nil
}

// The request id of a call passed to the leader (internal/requestid: the
// follower's request's, made now if it had none yet, so that the
// follower's X-Request-Id names it) travels in the command's payload, under
// requestIDKey beside the operation's arguments, which are a JSON object:
// the leader's log lines for the command carry it (request_id), and the
// answer's errors whose detail it held back are answered with it by the
// follower. A leader of an earlier build ignores it, as it ignores any
// field it does not know; a command without it is logged without an id.
const requestIDKey = "switchyard.requestId"

// withRequestID returns payload, a JSON object, carrying the request id id
// ("" adds nothing).
func withRequestID(payload json.RawMessage, id string) json.RawMessage {
	if id == "" || len(payload) < 2 || payload[0] != '{' {
		return payload
	}
	key, _ := json.Marshal(requestIDKey)
	val, _ := json.Marshal(id)
	out := make(json.RawMessage, 0, len(payload)+len(key)+len(val)+2)
	out = append(append(append(append(out, '{'), key...), ':'), val...)
	if rest := bytes.TrimSpace(payload[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, payload[1:]...)
}

// requestIDOf returns the request id a command's payload carries (a Valid
// one), or "".
func requestIDOf(payload json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(m[requestIDKey], &id) != nil || !requestid.Valid(id) {
		return ""
	}
	return id
}

// handler applies a command on the leader and encodes its answer.
type handler func(ctx context.Context, l *leader, payload json.RawMessage) (json.RawMessage, error)

func (o op[A, R]) handler() (string, handler) {
	return o.kind, func(ctx context.Context, l *leader, payload json.RawMessage) (json.RawMessage, error) {
		var args A
		if err := json.Unmarshal(payload, &args); err != nil {
			return nil, fmt.Errorf("decode %s: %w", o.kind, err)
		}
		res, err := o.apply(ctx, l, args)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
}

// answer is a command's result as the store holds it: the operation's answer,
// or its error.
type answer struct {
	OK  json.RawMessage `json:"ok,omitempty"`
	Err *wireError      `json:"err,omitempty"`
}

// wireError carries an error between nodes, keeping what the API reports of
// it: the engine error's fields, and the registry's sentinel errors.
type wireError struct {
	Code      engine.Code         `json:"code,omitempty"`
	Message   string              `json:"message"`
	Field     string              `json:"field,omitempty"`
	IDs       []string            `json:"ids,omitempty"`
	Retryable bool                `json:"retryable,omitempty"`
	Counts    *engine.QueueCounts `json:"counts,omitempty"`
	TaskID    string              `json:"taskId,omitempty"`
	Sentinel  string              `json:"sentinel,omitempty"`
	// Cause is the cause of an engine error as clients may read it (a
	// store error in general terms: storeerr.Public).
	Cause string `json:"cause,omitempty"`
	// LeaseState is how the lease of a pull.LostError ended (Message is
	// its reason).
	LeaseState pull.End `json:"leaseState,omitempty"`
	// Withheld says that the error held a store error, told in general
	// terms (in Cause, or in Message for an error that is no engine
	// error), whose full text the leader Node logged, with the command's
	// request id.
	Withheld bool   `json:"withheld,omitempty"`
	Node     string `json:"node,omitempty"`
}

// sentinels are the errors callers test with errors.Is.
var sentinels = map[string]error{
	"unknown-instance":   executor.ErrUnknownInstance,
	"duplicate-instance": executor.ErrDuplicateInstance,
	"not-removable":      executor.ErrNotRemovable,
	"not-found":          engine.ErrNotFound,
}

func encodeError(err error) *wireError {
	var lost *pull.LostError
	if errors.As(err, &lost) {
		return &wireError{Code: pull.CodeLeaseLost, Message: lost.Reason, TaskID: lost.TaskID, LeaseState: lost.End}
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		return &wireError{Code: ee.Code, Message: ee.Message, Field: ee.Field, IDs: ee.IDs, Retryable: ee.Retryable,
			Counts: ee.Counts, TaskID: ee.TaskID, Cause: storeerr.Public(ee.Err), Withheld: storeerr.IsStore(ee.Err)}
	}
	// The follower answers its client with the message: no database
	// address in it.
	w := &wireError{Message: storeerr.Public(err), Withheld: storeerr.IsStore(err)}
	for name, s := range sentinels {
		if errors.Is(err, s) {
			w.Sentinel = name
		}
	}
	return w
}

func (w *wireError) decode() error {
	if w.LeaseState != "" {
		return &pull.LostError{TaskID: w.TaskID, End: w.LeaseState, Reason: w.Message}
	}
	if w.Code != "" {
		var cause error
		switch {
		case w.Withheld:
			cause = storeerr.Relayed(w.Cause, w.logger())
		case w.Cause != "":
			cause = errors.New(w.Cause)
		}
		return &engine.Error{Code: w.Code, Message: w.Message, Field: w.Field, IDs: w.IDs, Retryable: w.Retryable,
			Counts: w.Counts, TaskID: w.TaskID, Err: cause}
	}
	r := &remoteError{msg: w.Message, sentinel: sentinels[w.Sentinel]}
	if w.Withheld {
		r.withheld = storeerr.Relayed(w.Message, w.logger())
	}
	return r
}

// logger names, in words, the node that logged a withheld error in full.
func (w *wireError) logger() string {
	if w.Node == "" {
		return "the leader"
	}
	return "the leader " + w.Node
}

// remoteError is an error the leader returned, with the sentinel it
// wrapped, and the store error it told in general terms (withheld: a
// storeerr.Relayed whose text is the message's).
type remoteError struct {
	msg                string
	sentinel, withheld error
}

func (e *remoteError) Error() string {
	if e.withheld != nil {
		return e.withheld.Error()
	}
	return e.msg
}

func (e *remoteError) Unwrap() []error {
	var out []error
	for _, err := range []error{e.sentinel, e.withheld} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// command sends a command to the leader and waits for its answer.
// A command is refused at once while the leader is known to fail its
// commits, and stops waiting for its answer once the leader is
// (leaderhealth.go): a change could not be made durable, and the answer to
// a read is a write of the leader's too. A call is refused at once as well
// once no node has led for longer than a failover takes (leaderless),
// before its command is written, so that a refused change is never applied
// later; in a failover of the usual length it waits for the next leader:
// whatever node takes over applies the commands pending in the store,
// those written before it led included. A read that waits when this
// node itself takes over ends with errTookOver, and the node serves it (op.call).
// A change goes on waiting then: the node applies it from the store as
// any new leader would, once (applying it here as well would apply it
// twice at once). A call that gets no answer in time says who leads now
// (noAnswer).
func (n *Node) command(ctx context.Context, kind string, payload json.RawMessage) (json.RawMessage, error) {
	watch, err := n.leaderFailing()
	if err != nil {
		return nil, err
	}
	change := mutates(kind)
	var took <-chan struct{}
	if !change {
		took = n.tookOver()
	}
	if err := n.leaderless(ctx); err != nil {
		return nil, err // before the command is written: a change is not applied later
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.opts.CallTimeout)
		defer cancel()
	}
	select {
	case <-took:
		return nil, errTookOver
	default:
	}
	start := time.Now()
	id, err := n.store.SubmitCommand(ctx, n.opts.Node, kind, payload)
	if err != nil {
		return nil, &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Err: err, Message: "the store did not take the command"}
	}
	raw, err := n.awaitAnswer(ctx, id, watch, took, change)
	if err != nil {
		var ce *postgres.CommandError
		if errors.As(err, &ce) {
			n.leaderAnswered()
			return nil, &remoteError{msg: ce.Message}
		}
		if errors.Is(err, errTookOver) || engine.IsCode(err, engine.CodeUnavailable) {
			return nil, err // this node leads now, or the leader is known to fail its commits
		}
		return nil, n.noAnswer(ctx, kind, err, change, time.Since(start))
	}
	n.leaderAnswered()
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("cluster: the answer to command %d: %w", id, err)
	}
	if a.Err != nil {
		return nil, a.Err.decode()
	}
	return a.OK, nil
}

// errTookOver ends a read's wait for the leader's answer when this node
// takes over: it serves the read itself.
var errTookOver = errors.New("this node took over as leader")

// noAnswer answers a call whose wait for the leader's answer ended on err
// (its context's) after waited, saying who leads now, as the lease shows:
// the leader, that did not answer in time (it may be slow, or unable to
// commit, or dead with its lease not yet expired); this node, that took
// over while a change waited and has not applied it yet; or nobody. A
// change may still be applied, by the leader or the next one (commands
// stay in the store until one does); a read was not served, and may be
// sent again. The error is told in those words alone: err (a context's
// "context deadline exceeded") says nothing more to a client, and goes to
// the log, at debug level (an outage would log every call otherwise), with
// the call's kind and request id.
func (n *Node) noAnswer(ctx context.Context, kind string, err error, change bool, waited time.Duration) error {
	lctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	lease, lerr := n.store.Lease(lctx)
	in := waited.Round(100 * time.Millisecond)
	var msg string
	switch {
	case lerr != nil:
		msg = fmt.Sprintf("no leader answered within %s", in)
	case lease.Held && lease.Node == n.opts.Node:
		msg = fmt.Sprintf("this node took over as leader while the call waited, and did not answer it within %s", in)
	case lease.Held:
		msg = fmt.Sprintf("the leader (%s) did not answer within %s", lease.Node, in)
	default:
		msg = fmt.Sprintf("no leader answered within %s: no node leads the cluster", in)
	}
	elected := lerr != nil || !lease.Held
	switch {
	case change && elected:
		msg += "; the operation may still be applied when one is elected"
	case change:
		msg += "; the operation may still be applied"
	case elected:
		msg += "; the read was not served; try again once one is elected"
	default:
		msg += "; the read was not served; try again"
	}
	n.log.Debug("a call to the leader got no answer", "command", kind, "request_id", requestid.ID(ctx),
		"waited", in, "answer", msg, "error", err)
	return &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: msg}
}

// serveCommands applies the commands of every node while this node leads.
// Commands are applied concurrently; each is completed with its answer.
func (n *Node) serveCommands(ctx context.Context, l *leader) {
	handlers := n.handlers
	sem := make(chan struct{}, 64)
	for ctx.Err() == nil {
		cmds, err := n.store.TakeCommands(ctx, 64)
		if err != nil {
			if ctx.Err() == nil {
				n.commandReads.Fail(n.log, hclog.Error, "reading commands; retrying, the next failures are not logged until it succeeds", "error", err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		n.commandReads.OK(n.log, "reading commands succeeds again")
		if len(cmds) == 0 {
			_ = n.store.WaitCommands(ctx)
			continue
		}
		for _, c := range cmds {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				n.apply(ctx, l, handlers, c)
			}()
		}
	}
}

func (n *Node) apply(ctx context.Context, l *leader, handlers map[string]handler, c postgres.Command) {
	rid := requestIDOf(c.Payload)
	if rid != "" {
		// What the leader logs of the command, and audits, names the
		// follower's request.
		ctx = requestid.WithID(ctx, rid)
	}
	var a answer
	if h := handlers[c.Kind]; h == nil {
		a.Err = &wireError{Code: engine.CodeInvalidInput, Message: "unknown command " + c.Kind}
	} else if res, err := h(ctx, l, c.Payload); err != nil {
		if ctx.Err() != nil {
			return // deposed mid-way: the next leader applies it again
		}
		n.withheld.Withheld(n.log, "a follower's command "+c.Kind, rid, err)
		a.Err = encodeError(err)
		if a.Err.Withheld {
			a.Err.Node = n.opts.Node
		}
	} else {
		a.OK = res
	}
	out, err := json.Marshal(a)
	if err != nil {
		n.log.Error("completing a command", n.commandArgs(c, rid, "error", err)...)
		return
	}
	n.complete(ctx, c, rid, out)
}

// commandArgs are the log arguments that name command c, with the
// request id rid it carries, followed by more.
func (n *Node) commandArgs(c postgres.Command, rid string, more ...any) []any {
	args := []any{"command", c.ID, "kind", c.Kind, "from", c.Node}
	if rid != "" {
		args = append(args, "request_id", rid)
	}
	return append(args, more...)
}

// complete writes a command's answer. A write that fails — a connection
// the database dropped, a moment it was away — is tried again, with a
// growing pause, for as long as the caller waits for it (Options.CallTimeout)
// and this node leads: the command has been applied, and without its answer
// the caller would wait out its time and be told that the leader did not
// answer.
func (n *Node) complete(ctx context.Context, c postgres.Command, rid string, out json.RawMessage) {
	deadline := time.Now().Add(n.opts.CallTimeout)
	pause := 20 * time.Millisecond
	for tries := 1; ; tries++ {
		err := n.store.CompleteCommand(ctx, c.ID, out, nil)
		if err == nil {
			if tries > 1 {
				n.log.Info("completed a command after its answer failed to be written", n.commandArgs(c, rid, "tries", tries)...)
			}
			return
		}
		if ctx.Err() != nil || errors.Is(err, postgres.ErrNotLeader) {
			return // deposed: the next leader applies it again
		}
		if tries == 1 {
			n.log.Warn("completing a command failed; retrying", n.commandArgs(c, rid, "error", err)...)
		}
		if time.Now().Add(pause).After(deadline) {
			n.log.Error("completing a command failed; its caller is told that the leader did not answer in time", n.commandArgs(c, rid,
				"tries", tries, "error", err)...)
			return
		}
		sleep(ctx, pause)
		pause = min(2*pause, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
