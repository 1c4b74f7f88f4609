// Errors as the API reports them: every error a resolver returns becomes a
// GraphQL error whose extensions carry a code from the ErrorCode enum and,
// where they apply, the input field at fault, whether a retry may help, the
// ids involved, the queue counts and the task recorded for a refusal.
//
// A store error in an error's chain (the database unreachable, a write
// refused) is told in general terms — "the database cannot be reached
// (connection refused)" — without the database's address, user, name or
// file (internal/storeerr); the server log has the full error, and the
// error's extensions.requestId names the request in that log.

package resolvers

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/go-hclog"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// PresentError is the server's error presenter: it keeps gqlgen's own codes
// (GRAPHQL_PARSE_FAILED, GRAPHQL_VALIDATION_FAILED) and gives every other
// error an ErrorCode. A store error is told in general terms (Message);
// NewErrorPresenter also logs what was withheld.
func PresentError(ctx context.Context, err error) *gqlerror.Error {
	gerr := graphql.DefaultErrorPresenter(ctx, err)
	var ee *engine.Error
	if errors.As(err, &ee) {
		gerr.Message = Message(ee)
		gerr.Extensions = Extensions(ee)
		return gerr
	}
	if storeerr.IsStore(err) {
		gerr.Message = Message(err)
	}
	if gerr.Extensions != nil && gerr.Extensions["code"] != nil {
		return gerr
	}
	if gerr.Extensions == nil {
		gerr.Extensions = map[string]any{}
	}
	gerr.Extensions["code"] = string(model.CodeInternal)
	// An error whose path goes past the field's into its arguments is an
	// argument that did not convert (a Time that is not RFC 3339, an Int64
	// that is not a number): malformed input.
	if field := graphql.GetPath(ctx); len(gerr.Path) > len(field) {
		var in []string
		for _, el := range gerr.Path[len(field):] {
			switch el := el.(type) {
			case ast.PathName:
				in = append(in, string(el))
			case ast.PathIndex:
				in = append(in, strconv.Itoa(int(el)))
			}
		}
		gerr.Extensions["code"] = string(engine.CodeInvalidInput)
		gerr.Extensions["field"] = strings.Join(in, ".")
		gerr.Extensions["retryable"] = false
	}
	return gerr
}

// NewErrorPresenter returns PresentError that also logs, to log, the full
// error of each answer whose store error it told in general terms: the
// first of a kind, and once a minute while they go on (storeerr.Log). Such
// an error carries its request's id in extensions.requestId, as the log
// line does in request_id (internal/requestid).
func NewErrorPresenter(log hclog.Logger) graphql.ErrorPresenterFunc {
	withheld := &storeerr.Log{}
	return func(ctx context.Context, err error) *gqlerror.Error {
		if !storeerr.IsStore(err) {
			return PresentError(ctx, err)
		}
		// Logged first: PresentError may rewrite err's message (err is
		// often the *gqlerror.Error it returns).
		id := requestid.ID(ctx)
		withheld.Withheld(log, "graphql", id, err)
		gerr := PresentError(ctx, err)
		WithRequestID(gerr, id)
		return gerr
	}
}

// WithRequestID puts a request's id in the extensions of an error whose
// detail was held back from the client (extensions.requestId), so that
// the client can quote it and an operator find the log line; "" adds
// nothing.
func WithRequestID(gerr *gqlerror.Error, id string) {
	if id == "" {
		return
	}
	if gerr.Extensions == nil {
		gerr.Extensions = map[string]any{}
	}
	gerr.Extensions["requestId"] = id
}

// Message is the message clients are given for err: its own text, with a
// store error in it told in general terms (storeerr.Public).
func Message(err error) string { return storeerr.Public(err) }

// Extensions returns the GraphQL error extensions of an engine error.
func Extensions(e *engine.Error) map[string]any {
	ext := map[string]any{"code": string(e.Code), "retryable": e.Retryable}
	if e.Field != "" {
		ext["field"] = e.Field
	}
	if len(e.IDs) > 0 {
		ext["ids"] = e.IDs
	}
	if c := e.Counts; c != nil {
		ext["counts"] = map[string]any{"scope": c.Scope, "key": c.Key, "queued": c.Queued, "cap": c.Cap}
	}
	if e.TaskID != "" {
		ext["taskId"] = e.TaskID
	}
	return ext
}

// asEngineError returns err as an engine error, wrapping foreign errors as
// INTERNAL.
func asEngineError(err error) *engine.Error {
	var ee *engine.Error
	if errors.As(err, &ee) {
		return ee
	}
	return &engine.Error{Code: model.CodeInternal, Message: "internal error", Err: err}
}

// inField re-roots the field of an engine error under prefix: the engine
// names fields of its own TaskSpec ("lane", "items.3.dependsOn"), the API
// names them from the operation's arguments ("input.lane",
// "input.items.3.task.dependsOn").
func inField(err error, prefix string) error {
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Field == "" || strings.HasPrefix(ee.Field, prefix) {
		return err
	}
	cp := *ee
	f := ee.Field
	if rest, ok := strings.CutPrefix(f, "items."); ok {
		idx, sub, _ := strings.Cut(rest, ".")
		if _, aerr := strconv.Atoi(idx); aerr == nil {
			switch sub {
			case "", "key":
				f = "items." + rest
			default:
				f = "items." + idx + ".task." + sub
			}
		}
	}
	cp.Field = prefix + "." + f
	return &cp
}

// notAvailable answers operations on a component this server runs without.
func notAvailable(what string) error {
	return &engine.Error{Code: engine.CodeUnavailable, Message: what + " not available on this server"}
}

// limitError is a LIMIT error.
func limitError(field, format string, args ...any) *engine.Error {
	e := invalid(field, format, args...)
	e.Code = engine.CodeLimit
	return e
}
