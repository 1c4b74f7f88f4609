// The submitTask fast path: the one hot mutation answered without gqlgen's
// executor when its answer is plain.
//
// A single submitTask costs about 120 µs of CPU at concurrency 64 (client
// included), and gqlgen's execution of the operation around the resolver —
// the operation context, the field contexts and interceptors, the argument
// map, the field set it marshals — was about 15 % of it, with 70 of its 190
// allocations (ADR 0005, finding 32). For an operation of one shape, the one
// agents send in a loop, the server does what the executor would do, and
// hands everything else to the executor:
//
//	mutation [Name] ($in: SubmitTaskInput!) { [alias:] submitTask(input: $in) { <Task leaves> } }
//
// where the Task leaves are id, agentId, lane, state and __typename, with
// aliases, no directives, no fragments. The plan of a query is made from the
// document in the executor's query cache, which gqlgen put there once it
// had parsed and validated it (a query's first request goes through the
// executor), and only when the server's depth and complexity limits allow
// it. A request takes the fast path when its variables are that one input,
// read typed by the body decoder (model.SubmitTaskJSON: only what gqlparser
// would accept unchanged), with no extensions and no other operation name.
//
// What the executor would do, in its order: the gate (auth.Gate.Admit: the
// identity, the role, the rate); the resolver (resolvers.Tools.SubmitTask,
// the field's own); the audit line (auth.Audit.Mutation); the answer,
// marshalled by gqlgen's own marshallers, with the replayed extension of a
// keyed input, written by writeGraphQL. Whatever the fast path does not
// answer goes to the executor untouched: a request the gate refuses (its
// refusal is the executor's, with its log line and status), and a
// resolver's error, panic or missing task, handed over with the outcome in
// the context (resolvers.WithSubmitted: the resolver does not run twice;
// auth.Admitted: the rate is not taken twice), so that every error is
// presented, logged and given its status as before. fastsubmit_test.go
// checks that both paths give the same answers, headers and audit lines.

package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/graph/resolvers"
)

// submitFast serves the submitTask requests it has a plan for.
type submitFast struct {
	docs   graphql.Cache[*ast.QueryDocument] // the executor's query cache: parsed and validated documents
	plans  *lru.LRU[*submitPlan]             // by query; noPlan for a query that has none
	limits graphql.OperationContextMutator   // the server's depth and complexity limits
	tools  resolvers.Tools
	gate   *auth.Gate
	audit  *auth.Audit

	// answered counts the requests it answered; handed those it handed
	// to the executor after running their resolver (tests read them).
	answered, handed atomic.Int64
}

// submitPlan is what the fast path needs of an operation it serves.
type submitPlan struct {
	opName  string     // the operation's name; "" when anonymous
	varName string     // the variable holding the input
	key     string     // the field's response key (its alias, or submitTask)
	rootKey []byte     // key as JSON
	leaves  []taskLeaf // the Task fields selected, in order
	keyJSON [][]byte   // each leaf's response key, as JSON
}

// noPlan marks a query the fast path does not serve.
var noPlan = &submitPlan{}

// taskLeaf is a selected Task field the fast path marshals.
type taskLeaf uint8

const (
	leafTypename taskLeaf = iota
	leafID
	leafAgentID
	leafLane
	leafState
)

var taskLeaves = map[string]taskLeaf{
	"__typename": leafTypename, "id": leafID, "agentId": leafAgentID, "lane": leafLane, "state": leafState,
}

// newSubmitFast returns the fast path over the executor's query cache,
// with the server's limits, resolvers, gate and audit log.
func newSubmitFast(docs graphql.Cache[*ast.QueryDocument], limits graphql.OperationContextMutator, tools resolvers.Tools,
	gate *auth.Gate, audit *auth.Audit) *submitFast {
	return &submitFast{docs: docs, plans: lru.New[*submitPlan](1000), limits: limits, tools: tools, gate: gate, audit: audit}
}

// plan returns the plan of params' query, or nil when the fast path does
// not serve it.
func (f *submitFast) plan(ctx context.Context, params *graphql.RawParams) *submitPlan {
	p, ok := f.plans.Get(ctx, params.Query)
	if !ok {
		doc, cached := f.docs.Get(ctx, params.Query)
		if !cached {
			return nil // not validated yet: the executor parses and caches it
		}
		p = f.makePlan(ctx, doc)
		f.plans.Add(ctx, params.Query, p)
	}
	if p == noPlan || (params.OperationName != "" && params.OperationName != p.opName) {
		return nil
	}
	return p
}

// makePlan returns the plan of a validated document, or noPlan.
func (f *submitFast) makePlan(ctx context.Context, doc *ast.QueryDocument) *submitPlan {
	if len(doc.Operations) != 1 || len(doc.Fragments) != 0 {
		return noPlan
	}
	op := doc.Operations[0]
	if op.Operation != ast.Mutation || len(op.Directives) != 0 || len(op.VariableDefinitions) != 1 || len(op.SelectionSet) != 1 {
		return noPlan
	}
	def := op.VariableDefinitions[0]
	if def.Type.NamedType != "SubmitTaskInput" || !def.Type.NonNull || def.DefaultValue != nil || len(def.Directives) != 0 {
		return noPlan
	}
	field, ok := op.SelectionSet[0].(*ast.Field)
	if !ok || field.Name != "submitTask" || len(field.Directives) != 0 || len(field.Arguments) != 1 {
		return noPlan
	}
	if arg := field.Arguments[0]; arg.Name != "input" || arg.Value.Kind != ast.Variable || arg.Value.Raw != def.Variable {
		return noPlan
	}
	if err := f.limits.MutateOperationContext(ctx, &graphql.OperationContext{Doc: doc, Operation: op}); err != nil {
		return noPlan // the executor refuses it with the limit's error
	}
	p := &submitPlan{opName: op.Name, varName: def.Variable, key: field.Alias, rootKey: gqlString(field.Alias)}
	seen := map[string]bool{}
	for _, sel := range field.SelectionSet {
		leaf, ok := sel.(*ast.Field)
		if !ok || len(leaf.Directives) != 0 || len(leaf.Arguments) != 0 || len(leaf.SelectionSet) != 0 {
			return noPlan
		}
		which, ok := taskLeaves[leaf.Name]
		if !ok {
			return noPlan
		}
		if seen[leaf.Alias] { // validation let it through: the same field twice, merged
			continue
		}
		seen[leaf.Alias] = true
		p.leaves = append(p.leaves, which)
		p.keyJSON = append(p.keyJSON, gqlString(leaf.Alias))
	}
	if len(p.leaves) == 0 {
		return noPlan
	}
	return p
}

// serve answers params' submitTask when it has a plan and the request is
// one the fast path serves; otherwise, or when the answer is not plain, it
// hands the request to the executor (handOver).
func (f *submitFast) serve(ctx context.Context, w http.ResponseWriter, params *graphql.RawParams, handOver func(context.Context)) bool {
	p := f.plan(ctx, params)
	if p == nil || len(params.Extensions) != 0 || len(params.Variables) != 1 {
		return false
	}
	raw, ok := params.Variables[p.varName].(*model.SubmitTaskJSON)
	if !ok || !f.gate.Admit(ctx, "Mutation", "submitTask") {
		return false
	}
	var input model.SubmitTaskInput
	if err := input.UnmarshalGQLContext(ctx, raw); err != nil {
		handOver(auth.Admitted(ctx)) // the executor converts it again, and says what it refuses
		return true
	}
	start := time.Now()
	out := f.resolve(ctx, input)
	if out.Task == nil || out.Err != nil || out.Panic != nil {
		f.handed.Add(1)
		handOver(resolvers.WithSubmitted(auth.Admitted(ctx), out))
		return true
	}
	f.answered.Add(1)
	if f.audit.Enabled() {
		f.audit.Mutation(ctx, "submitTask", map[string]any{"input": input}, out.Task, nil, start)
	}
	body := p.marshal(out.Task)
	keyed := input.IdempotencyKey != nil && *input.IdempotencyKey != ""
	if keyed || !plainJSON(body[len(`{"data":`):]) {
		res := &graphql.Response{Data: body[len(`{"data":`) : len(body)-1]}
		if keyed {
			res.Extensions = map[string]any{resolvers.ReplayedExtension: map[string]bool{p.key: out.Replayed}}
		}
		writeGraphQL(w, http.StatusOK, res)
		return true
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // what writeGraphQL writes for data alone
	return true
}

// resolve runs the resolver, catching a panic for the executor to meet
// again.
func (f *submitFast) resolve(ctx context.Context, input model.SubmitTaskInput) (out *resolvers.Submitted) {
	out = &resolvers.Submitted{}
	defer func() {
		if p := recover(); p != nil {
			out.Panic = p
		}
	}()
	out.Task, out.Replayed, out.Err = f.tools.SubmitTask(ctx, input)
	return out
}

// marshal writes the answer, its data as gqlgen would:
// {"data":{"submitTask":{"id":…,…}}}, keys as aliased.
func (p *submitPlan) marshal(t *model.Task) []byte {
	var b bytes.Buffer
	b.Grow(40 + 48*len(p.leaves))
	b.WriteString(`{"data":{`)
	b.Write(p.rootKey)
	b.WriteString(":{")
	for i, leaf := range p.leaves {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(p.keyJSON[i])
		b.WriteByte(':')
		var v string
		switch leaf {
		case leafTypename:
			v = "Task"
		case leafID:
			v = t.ID()
		case leafAgentID:
			v = t.AgentID()
		case leafLane:
			v = t.Lane()
		case leafState:
			v = t.State().String()
		default:
			panic(fmt.Sprintf("submitTask fast path: leaf %d", leaf))
		}
		graphql.MarshalString(v).MarshalGQL(&b)
	}
	b.WriteString("}}}")
	return b.Bytes()
}

// gqlString is s as gqlgen writes a string (its keys and String values).
func gqlString(s string) []byte {
	var b bytes.Buffer
	graphql.MarshalString(s).MarshalGQL(&b)
	return b.Bytes()
}
