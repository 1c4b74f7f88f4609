// Introspection turned off (api.introspection: false): an operation that
// asks for __schema or __type is refused before it runs, with FORBIDDEN
// (HTTP 403), and validation errors suggest no field or type names, so
// nothing about the schema leaks through "Did you mean …?". __typename
// stays: it names the type of an object the client already has.

package server

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/graph/auth"
)

// noIntrospection is the gqlgen extension that refuses introspection.
type noIntrospection struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = noIntrospection{}

func (noIntrospection) ExtensionName() string                   { return "SwitchyardNoIntrospection" }
func (noIntrospection) Validate(graphql.ExecutableSchema) error { return nil }

func (noIntrospection) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || !introspects(oc.Operation.SelectionSet, 0) {
		return nil
	}
	err := gqlerror.Errorf("introspection is turned off on this server (api.introspection: false): __schema and __type are refused")
	err.Extensions = map[string]any{"code": auth.CodeForbidden, "retryable": false}
	return err
}

// introspects reports whether a root selection set asks for __schema or
// __type, through fragments too. Validation has passed, so they can be only
// there (they are fields of the query root) and fragments have no cycles;
// guard bounds the walk anyway.
func introspects(set ast.SelectionSet, guard int) bool {
	if guard > 64 {
		return false
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == "__schema" || s.Name == "__type" {
				return true
			}
		case *ast.InlineFragment:
			if introspects(s.SelectionSet, guard+1) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && introspects(s.Definition.SelectionSet, guard+1) {
				return true
			}
		}
	}
	return false
}
