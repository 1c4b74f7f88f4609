// The gate: a gqlgen extension that checks every root field of an operation
// against the access table, then the mutation rate limit, after validation
// and before any resolver runs. A refused operation runs nothing: a mutation
// that names one forbidden field among allowed ones changes nothing at all.

package auth

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Error codes of refusals (extensions.code).
const (
	CodeUnauthenticated = "UNAUTHENTICATED"
	CodeForbidden       = "FORBIDDEN"
	CodeRateLimited     = "RATE_LIMITED"
	CodeLimit           = "LIMIT"
)

// Refusal describes an operation the gate refused.
type Refusal struct {
	Identity   *Identity // nil for UNAUTHENTICATED
	Operation  ast.Operation
	Fields     []string // the operation's root fields
	Code       string   // CodeUnauthenticated, CodeForbidden, CodeRateLimited or CodeLimit
	Message    string
	RetryAfter time.Duration // for CodeRateLimited
}

// Gate enforces the access table and the rate limits. Add it to the gqlgen
// server with Use, before the other operation extensions.
type Gate struct {
	// Limiter limits mutations per identity; nil: no limit.
	Limiter *RateLimiter
	// Refused, when set, learns of every refusal: the server sets the HTTP
	// status from it, the audit log records refused mutations.
	Refused func(ctx context.Context, r Refusal)
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = (*Gate)(nil)

// ExtensionName names the extension.
func (g *Gate) ExtensionName() string { return "SwitchyardGate" }

// Validate refuses a schema with an operation the table does not list, so
// that a server with a forgotten operation does not start.
func (g *Gate) Validate(es graphql.ExecutableSchema) error {
	if missing := Missing(es.Schema()); len(missing) > 0 {
		return fmt.Errorf("auth: the access table (graph/auth/access.go) has no entry for %s", strings.Join(missing, ", "))
	}
	return nil
}

// Missing returns the root fields of a schema that the access table does
// not list, sorted.
func Missing(s *ast.Schema) []string {
	var out []string
	for _, root := range []*ast.Definition{s.Query, s.Mutation, s.Subscription} {
		if root == nil {
			continue
		}
		for _, f := range root.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			if _, ok := Lookup(root.Name, f.Name); !ok {
				out = append(out, root.Name+"."+f.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// rootTypes are the names of the root types by operation.
var rootTypes = map[ast.Operation]string{ast.Query: "Query", ast.Mutation: "Mutation", ast.Subscription: "Subscription"}

// MutateOperationContext checks the operation.
func (g *Gate) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	op := opCtx.Operation
	if op == nil {
		return nil
	}
	root := rootTypes[op.Operation]
	var names []string
	for _, f := range graphql.CollectFields(opCtx, op.SelectionSet, []string{root}) {
		if !strings.HasPrefix(f.Name, "__") { // __typename, and introspection (refused by gqlgen when disabled)
			names = append(names, f.Name)
		}
	}
	id := FromContext(ctx)
	refuse := func(code, msg string, retry time.Duration) *gqlerror.Error {
		if g.Refused != nil {
			g.Refused(ctx, Refusal{Identity: id, Operation: op.Operation, Fields: names, Code: code, Message: msg, RetryAfter: retry})
		}
		return Error(code, msg, retry)
	}
	if id == nil {
		return refuse(CodeUnauthenticated, ErrUnauthenticated.Error(), 0)
	}
	for _, name := range names {
		a, ok := Lookup(root, name)
		switch {
		case !ok:
			return refuse(CodeForbidden, fmt.Sprintf("%s.%s is not in the access table: nobody may run it", root, name), 0)
		case !a.Allows(id):
			return refuse(CodeForbidden, fmt.Sprintf("%s needs the role %s; token %q is %s", name, orList(a.Roles), id.Name, id.Role), 0)
		}
	}
	if op.Operation == ast.Mutation && len(names) > 0 && ctx.Value(admittedKey{}) == nil {
		ok, wait := g.Limiter.Take(id.Name, len(names))
		switch {
		case ok:
		case wait < 0:
			return refuse(CodeLimit, fmt.Sprintf("an operation may carry at most %d mutations; this one has %d", g.Limiter.Burst(), len(names)), 0)
		default:
			return refuse(CodeRateLimited, fmt.Sprintf("%s is over its rate of mutations: retry in %s", RateHolder(id.Name), time.Duration(RetryAfterMs(wait))*time.Millisecond), wait)
		}
	}
	return nil
}

// Admit is the gate's check of a request of one mutation field, root.name,
// that the server runs outside gqlgen's executor (its fast path for
// submitTask): whether the caller's identity may run it and its rate has
// room, taking from the rate as MutateOperationContext does. A request it
// refuses is neither logged nor answered: the caller hands it to the
// executor, whose gate refuses it with the error and log line of any
// refusal (or runs it, when the rate has filled meanwhile). Admitted marks
// a context whose request Admit let through, for the executor's gate not to
// take from the rate again when the request is handed over after all.
func (g *Gate) Admit(ctx context.Context, root, name string) bool {
	id := FromContext(ctx)
	if a, ok := Lookup(root, name); !ok || !a.Allows(id) {
		return false
	}
	ok, _ := g.Limiter.Take(id.Name, 1)
	return ok
}

// Admitted returns ctx marked as the context of a request Admit let through.
func Admitted(ctx context.Context) context.Context {
	return context.WithValue(ctx, admittedKey{}, true)
}

type admittedKey struct{}

// orList writes a role set as "admin or operator".
func orList(s RoleSet) string {
	names := strings.Split(s.String(), ", ")
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Error returns a refusal as a GraphQL error with its code in extensions
// (and retryAfterMs for RATE_LIMITED).
func Error(code, msg string, retryAfter time.Duration) *gqlerror.Error {
	ext := map[string]any{"code": code, "retryable": code == CodeRateLimited}
	if code == CodeRateLimited {
		ext["retryAfterMs"] = RetryAfterMs(retryAfter)
	}
	return &gqlerror.Error{Message: msg, Extensions: ext}
}

// RetryAfterMs is a wait as retryAfterMs says it: in whole milliseconds,
// rounded up (at least 1), so that a client that waits that long finds the
// token there — truncated, 3.6 ms said 3 and the retry was refused again.
func RetryAfterMs(wait time.Duration) int64 {
	return max(int64((wait+time.Millisecond-1)/time.Millisecond), 1)
}
