// The audit log: one line per mutation on the switchyard.audit logger, with
// who ran it (the token's name and role — never the token), the operation,
// the ids it named or touched, the outcome, and the request's id
// (internal/requestid: made for the line when the caller sent none, so that
// the response's X-Request-Id names the line). Refused mutations are
// logged too (by the gate, through Refused).

package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/go-hclog"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/requestid"
)

// Audit is the gqlgen extension that logs mutations. Add it with Use.
type Audit struct {
	log hclog.Logger
}

// NewAudit returns the audit extension writing to log (name it
// "switchyard.audit": the server passes its logger's Named("audit")).
func NewAudit(log hclog.Logger) *Audit {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Audit{log: log}
}

var _ interface {
	graphql.HandlerExtension
	graphql.RootFieldInterceptor
	graphql.FieldInterceptor
} = (*Audit)(nil)

// ExtensionName names the extension.
func (a *Audit) ExtensionName() string { return "SwitchyardAudit" }

// Validate accepts any schema.
func (a *Audit) Validate(graphql.ExecutableSchema) error { return nil }

// record is what the field interceptor learns of a mutation for the root
// interceptor to log.
type record struct {
	ran  bool
	args map[string]any
	res  any
	err  error
}

type recordKey struct{}

// InterceptRootField logs each mutation field once it has run. With a
// logger that writes nothing at Info, it builds no record at all.
func (a *Audit) InterceptRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	if !a.log.IsInfo() {
		return next(ctx)
	}
	rc := graphql.GetRootFieldContext(ctx)
	if rc == nil || !graphql.HasOperationContext(ctx) {
		return next(ctx)
	}
	if op := graphql.GetOperationContext(ctx).Operation; op == nil || op.Operation != ast.Mutation {
		return next(ctx)
	}
	rec := &record{}
	start := time.Now()
	m := next(context.WithValue(ctx, recordKey{}, rec))
	a.line(ctx, rc.Field.Name, rec, start)
	return m
}

// Enabled reports whether mutations are logged: whether the logger writes
// at Info.
func (a *Audit) Enabled() bool { return a.log.IsInfo() }

// Mutation logs a mutation field that ran outside gqlgen's executor (the
// server's fast path for submitTask) as InterceptRootField logs one that
// ran inside it: op is the field's name, args its arguments as gqlgen
// converts them, res and err what its resolver returned, start when it
// began. Call it only when Enabled.
func (a *Audit) Mutation(ctx context.Context, op string, args map[string]any, res any, err error, start time.Time) {
	a.line(ctx, op, &record{ran: true, args: args, res: res, err: err}, start)
}

// line writes the audit line of the mutation field op.
func (a *Audit) line(ctx context.Context, op string, rec *record, start time.Time) {
	outcome, msg := "ok", ""
	switch {
	case !rec.ran:
		// The arguments did not convert: the resolver never ran.
		outcome, msg = string(engine.CodeInvalidInput), "the arguments were refused"
	case rec.err != nil:
		outcome, msg = codeOf(rec.err), messageOf(rec.err)
	case rec.res == nil:
		outcome = "none"
	}
	args := []any{"op", op, "outcome", outcome}
	args = append(args, who(FromContext(ctx))...)
	if t := Targets(op, rec.args, rec.res); len(t) > 0 {
		args = append(args, "targets", t)
	}
	if p, ok := rec.res.(*model.SubmitTasksPayload); ok && p != nil {
		args = append(args, "accepted", p.Accepted, "refused", p.Refused)
	}
	if msg != "" {
		args = append(args, "error", truncate(msg, 300))
	}
	if addr := RemoteAddr(ctx); addr != "" {
		args = append(args, "remote", addr)
	}
	if id := requestid.ID(ctx); id != "" {
		args = append(args, "request_id", id)
	}
	args = append(args, "took", time.Since(start).Round(time.Microsecond))
	a.log.Info("mutation", args...)
}

// InterceptField records a mutation's arguments, result and error for
// InterceptRootField. Other fields pass through at the cost of one check.
func (a *Audit) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Object != "Mutation" {
		return next(ctx)
	}
	res, err := next(ctx)
	if rec, ok := ctx.Value(recordKey{}).(*record); ok {
		rec.ran, rec.args, rec.res, rec.err = true, fc.Args, res, err
	}
	return res, err
}

// Refused logs a mutation the gate refused (pass it to Gate.Refused, or
// call it from there).
func (a *Audit) Refused(ctx context.Context, r Refusal) {
	if r.Operation != ast.Mutation {
		return
	}
	args := []any{"op", strings.Join(r.Fields, ","), "outcome", r.Code}
	args = append(args, who(r.Identity)...)
	args = append(args, "error", truncate(r.Message, 300))
	if addr := RemoteAddr(ctx); addr != "" {
		args = append(args, "remote", addr)
	}
	if id := requestid.ID(ctx); id != "" {
		args = append(args, "request_id", id)
	}
	a.log.Info("mutation refused", args...)
}

func who(id *Identity) []any {
	if id == nil {
		return []any{"token", "", "role", "none"}
	}
	out := []any{"token", id.Name, "role", id.Role.String()}
	if id.Role == RoleAgent {
		out = append(out, "agent", id.AgentID)
	}
	return out
}

// codeOf returns the API code of a resolver error.
func codeOf(err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) {
		return string(ee.Code)
	}
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		if c, ok := ge.Extensions["code"].(string); ok {
			return c
		}
	}
	return string(model.CodeInternal)
}

// messageOf returns a resolver error's message as the client reads it: a
// GraphQL error's own message, without the position and path that gqlgen
// adds to it once it is returned (input:1:21: failTask …), so that every
// refusal's audit line reads alike.
func messageOf(err error) string {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		return ge.Message
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// maxTargets bounds the ids one audit line lists (a batch's tasks).
const maxTargets = 128

// Targets returns the ids a mutation named (its arguments) and touched (its
// result), as "kind:id", without duplicates. Secrets in its input (an
// instance's token) are never read.
func Targets(op string, args map[string]any, res any) []string {
	// The targets are written one after the other into text, and cut into
	// strings of one allocation at the end: a batch names a hundred tasks.
	var text []byte
	var ends []int
	hint := 4
	if r, ok := res.(*model.SubmitTasksPayload); ok && r != nil {
		hint = min(len(r.Items)+4, maxTargets)
	}
	seen := make(map[[2]string]bool, hint) // by kind and id: a repeated target (a batch's agent) is written once
	add := func(kind, id string) {
		if id == "" || len(ends) >= maxTargets || seen[[2]string{kind, id}] {
			return
		}
		seen[[2]string{kind, id}] = true
		text = append(append(append(text, kind...), ':'), id...)
		ends = append(ends, len(text))
	}
	kind := kindOf(op)
	for _, name := range []string{"id", "name"} {
		if v, ok := args[name].(string); ok {
			add(kind, v)
		}
	}
	if v, ok := args["sessionKey"].(string); ok {
		add("session", v)
	}
	if v, ok := args["lane"].(string); ok {
		add("lane", v)
	}
	switch in := args["input"].(type) {
	case model.SubmitTaskInput:
		add("agent", in.AgentID)
	case model.SubmitTasksInput:
		for _, it := range in.Items {
			if it != nil && it.Task != nil {
				add("agent", it.Task.AgentID)
			}
		}
	case model.RegisterInstanceInput:
		add("instance", in.ID)
	case model.LoadPluginInput:
		add("plugin", in.Name)
	case model.ScheduleInput:
		if in.Template != nil {
			add("agent", in.Template.AgentID)
		}
	case model.SetPolicyInput:
		add("slot", in.Slot.String())
		if in.Lane != nil {
			add("lane", *in.Lane)
		}
		if in.Name != nil {
			add("policy", *in.Name)
		}
	}
	if f, ok := args["filter"].(model.TaskFilter); ok {
		for k, v := range map[string]*string{"agent": f.AgentID, "lane": f.Lane, "session": f.SessionKey, "batch": f.BatchID, "parent": f.ParentID} {
			if v != nil {
				add(k, *v)
			}
		}
	}
	switch r := res.(type) {
	case *model.Task:
		if r != nil {
			add("task", r.T.ID)
		}
	case *model.SubmitTasksPayload:
		if r != nil {
			if r.BatchID != nil {
				add("batch", *r.BatchID)
			}
			for _, it := range r.Items {
				if it != nil && it.Task != nil {
					add("task", it.Task.T.ID)
				}
			}
			for _, id := range r.TaskIDs { // the tasks of items that carry none
				add("task", id)
			}
		}
	case *model.CancelPayload:
		if r != nil {
			for _, id := range r.Ids {
				add("task", id)
			}
		}
	case *model.Schedule:
		if r != nil {
			add("schedule", r.S.ID)
		}
	case *model.ScheduleRun:
		if r != nil {
			add("task", r.R.TaskID)
		}
	case *model.Plugin:
		if r != nil {
			add("sha256", r.I.Hash)
		}
	case []*model.Lease: // never the lease ids: they are their workers' secrets
		for _, l := range r {
			if l != nil && l.Task != nil {
				add("task", l.Task.T.ID)
			}
		}
	case *model.Lease:
		if r != nil && r.Task != nil {
			add("task", r.Task.T.ID)
		}
	case *model.LeaseEndPayload:
		if r != nil && r.Task != nil {
			add("task", r.Task.T.ID)
		}
	}
	if len(ends) == 0 {
		return nil
	}
	all, out, start := string(text), make([]string, len(ends)), 0
	for i, end := range ends {
		out[i], start = all[start:end], end
	}
	return out
}

// kindOf names what an operation's id or name argument identifies, from the
// operation's name: cancelTask → task, updateLane → lane.
func kindOf(op string) string {
	for _, k := range []string{"Task", "Instance", "Schedule", "Plugin", "Lane", "Agent", "Session"} {
		if strings.HasSuffix(op, k) || strings.HasSuffix(op, k+"s") {
			return strings.ToLower(k)
		}
	}
	return "id"
}

type remoteKey struct{}

// WithRemoteAddr returns ctx carrying the client's address, for the audit
// log. The server's requests carry theirs already (requestid.Request).
func WithRemoteAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, remoteKey{}, addr)
}

// RemoteAddr returns the client's address of ctx (WithRemoteAddr's, else
// its request's), or "".
func RemoteAddr(ctx context.Context) string {
	if s, ok := ctx.Value(remoteKey{}).(string); ok {
		return s
	}
	if q := requestid.From(ctx); q != nil {
		return q.Remote
	}
	return ""
}
