package resolvers

import (
	"context"

	"github.com/switchyard/switchyard/graph/model"
)

// Tools are the mutations as the MCP server's tools call them (graph/mcp):
// the same validation, row-level rules and engine calls as over GraphQL,
// with what GraphQL reports beside a field's data (its response
// extensions) returned as values.
type Tools struct{ r *Resolver }

// Tools returns the mutations for the MCP server.
func (r *Resolver) Tools() Tools { return Tools{r} }

// SubmitTask is the submitTask mutation. replayed says that the input's
// idempotencyKey named a task recorded before for the same request: the
// task is that one, and nothing new was recorded (GraphQL's
// ReplayedExtension).
func (t Tools) SubmitTask(ctx context.Context, input model.SubmitTaskInput) (task *model.Task, replayed bool, err error) {
	return t.r.submitTask(ctx, input)
}

// CancelTask is the cancelTask mutation.
func (t Tools) CancelTask(ctx context.Context, id string, reason *string) (*model.Task, error) {
	return (*mutationResolver)(t.r).CancelTask(ctx, id, reason)
}
