// Marshalling submitTasks' items without a goroutine per item.

package model

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// MarshalList marshals a list of objects as graphql.MarshalSliceConcurrently
// does (one FieldContext per element, a panic recovered into an error and a
// null), but on the caller's goroutine, one element after another, when sel
// is shallow: nothing it selects below the elements' own fields has fields
// of its own. gqlgen's generated code marshals every element of a list of
// objects on a goroutine of its own, whatever it selects; for submitTasks'
// items as the CLI selects them (`items { index task { id state } error {
// code message } }`), those goroutines were a fifth of the CPU of a batch
// (ADR 0005, finding 13). `go generate ./graph` points the generated
// marshaller of SubmitTaskResult lists here (graph/internal/seqlists).
//
// In place, the elements' fields that run concurrently (resolvers, and
// methods that take a context) would run one element after another; the
// elements' fields and their fields' fields are not of that kind where
// MarshalList is used (SubmitTaskResult, and the Task and ItemError it
// holds, resolve concurrently only fields that are objects:
// TestListsMarshalledInPlaceSelectNothingConcurrent), and a deeper
// selection goes to gqlgen's concurrent marshaller.
func MarshalList(ctx context.Context, sel ast.SelectionSet, length int, workerLimit int64, omitPanicHandler bool,
	marshalElement func(ctx context.Context, i int) graphql.Marshaler,
) graphql.Array {
	if length <= 1 || !shallow(sel) {
		return graphql.MarshalSliceConcurrently(ctx, length, workerLimit, omitPanicHandler, marshalElement)
	}
	ret := make(graphql.Array, length)
	for i := range length {
		childCtx := graphql.WithFieldContext(ctx, &graphql.FieldContext{Index: &i})
		if omitPanicHandler {
			ret[i] = marshalElement(childCtx, i)
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					graphql.AddError(childCtx, graphql.Recover(childCtx, r))
					ret[i] = graphql.Null
				}
			}()
			ret[i] = marshalElement(childCtx, i)
		}()
	}
	return ret
}

// shallow reports whether every field sel selects selects only leaves.
func shallow(sel ast.SelectionSet) bool {
	ok := true
	walkFields(sel, func(f *ast.Field) {
		walkFields(f.SelectionSet, func(sub *ast.Field) {
			if len(sub.SelectionSet) > 0 {
				ok = false
			}
		})
	})
	return ok
}

// deep stands for what walkFields cannot see into: a field whose field has
// fields.
var deep = &ast.Field{SelectionSet: ast.SelectionSet{&ast.Field{SelectionSet: ast.SelectionSet{&ast.Field{}}}}}

// walkFields calls fn for each field of sel, through its fragments; a
// fragment it cannot follow, or one that is deferred, counts as a field
// with fields of its own.
func walkFields(sel ast.SelectionSet, fn func(*ast.Field)) {
	for _, s := range sel {
		switch s := s.(type) {
		case *ast.Field:
			fn(s)
		case *ast.InlineFragment:
			if s.Directives.ForName("defer") != nil {
				fn(deep)
				continue
			}
			walkFields(s.SelectionSet, fn)
		case *ast.FragmentSpread:
			if s.Definition == nil || s.Directives.ForName("defer") != nil {
				fn(deep)
				continue
			}
			walkFields(s.Definition.SelectionSet, fn)
		default:
			fn(deep)
		}
	}
}
