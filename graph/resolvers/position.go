// Task.position for every task an answer holds, not only task(id)'s: when
// the operation asks for position, the QUEUED tasks of a list or of a
// submission get theirs from the engine in one call (engine.Positions: one
// pass over each queue involved), not one count of the queue per task.

package resolvers

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/switchyard/switchyard/engine"
)

// positioner is the engine's Positions; an engine without it (a node of a
// cluster that does not lead) leaves positions to task(id).
type positioner interface {
	Positions(ids []string) map[string]int
}

// fillPositions sets the Position of the QUEUED tasks among ts, when the
// current field's selection asks for position.
func (r *Resolver) fillPositions(ctx context.Context, ts ...*engine.Task) {
	p, ok := r.eng.(positioner)
	if !ok || !selectsPosition(ctx) {
		return
	}
	var ids []string
	for _, t := range ts {
		if t != nil && t.State == engine.StateQueued && t.Position < 0 {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	pos := p.Positions(ids)
	for _, t := range ts {
		if n, ok := pos[t.ID]; ok && t.State == engine.StateQueued && t.Position < 0 {
			t.Position = n
		}
	}
}

// selectsPosition reports whether the current field's selection asks for a
// field named position at any depth (fragments included): Task's is the
// only one.
func selectsPosition(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return false
	}
	return hasField(fc.Field.Selections, "position", 0)
}

// selectsItemTasks reports whether the current field's selection (a
// submitTasks) may read an item's task: a field named task at any depth,
// fragments included, or a selection too deep to tell.
func selectsItemTasks(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	return fc == nil || mayHaveField(fc.Field.Selections, "task", 0)
}

// mayHaveField is hasField, answering yes past the depth it looks to.
func mayHaveField(set ast.SelectionSet, name string, depth int) bool {
	if depth > 32 {
		return true
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == name || mayHaveField(s.SelectionSet, name, depth+1) {
				return true
			}
		case *ast.InlineFragment:
			if mayHaveField(s.SelectionSet, name, depth+1) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition == nil || mayHaveField(s.Definition.SelectionSet, name, depth+1) {
				return true
			}
		}
	}
	return false
}

func hasField(set ast.SelectionSet, name string, depth int) bool {
	if depth > 32 {
		return false
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == name || hasField(s.SelectionSet, name, depth+1) {
				return true
			}
		case *ast.InlineFragment:
			if hasField(s.SelectionSet, name, depth+1) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && hasField(s.Definition.SelectionSet, name, depth+1) {
				return true
			}
		}
	}
	return false
}
