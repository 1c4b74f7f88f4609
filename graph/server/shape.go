// The shape of a query document, checked before gqlgen validates it: some
// shapes cost validation or field collection time quadratic in their size,
// well within the body limit. The document is parsed here (linear) only
// when it is not in the query cache; a cached one was checked when first
// seen.
//
//   - maxRepeats: validation compares every pair of fields that share a
//     response name in a selection set, so 10,000 copies of
//     `stats { submitted }` (190 KB) cost it more than 20 s of CPU.
//   - maxWidth: gqlgen collects a set's fields by searching those it has
//     collected, so 10,000 aliases of __typename cost half a second.
//   - maxQueryTokens bounds the document (variables are not tokens: a
//     batch of tasks goes in variables).
//   - the walk itself has a budget: fragments that spread each other twice
//     would expand exponentially.

package server

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

const (
	maxQueryTokens = 50_000
	maxRepeats     = 32
	maxWidth       = 1000
	shapeBudget    = 200_000 // selections visited per document
)

// shapeLimit is the gqlgen extension that checks a document's shape.
type shapeLimit struct {
	cache graphql.Cache[*ast.QueryDocument] // gqlgen's query cache
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = shapeLimit{}

func (shapeLimit) ExtensionName() string                   { return "SwitchyardShapeLimit" }
func (shapeLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l shapeLimit) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if _, ok := l.cache.Get(ctx, p.Query); ok {
		return nil
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: p.Query}, maxQueryTokens)
	if err != nil {
		return nil // gqlgen reports it
	}
	s := &shape{frags: map[string]*ast.FragmentDefinition{}, budget: shapeBudget}
	for _, f := range doc.Fragments {
		s.frags[f.Name] = f
	}
	for _, op := range doc.Operations {
		if err := s.walk(op.SelectionSet, 0); err != nil {
			return err
		}
	}
	for _, f := range doc.Fragments {
		if err := s.walk(f.SelectionSet, 0); err != nil {
			return err
		}
	}
	return nil
}

// shape checks the selection sets of one document.
type shape struct {
	frags  map[string]*ast.FragmentDefinition
	budget int
}

// walk checks a selection set, then the sets nested in it.
func (s *shape) walk(set ast.SelectionSet, depth int) *gqlerror.Error {
	if len(set) == 0 || depth > 256 {
		return nil
	}
	if err := s.check(set); err != nil {
		return err
	}
	for _, sel := range set {
		var sub ast.SelectionSet
		switch x := sel.(type) {
		case *ast.Field:
			sub = x.SelectionSet
		case *ast.InlineFragment:
			sub = x.SelectionSet
		}
		if err := s.walk(sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// check counts the fields of one selection set, fragments included.
func (s *shape) check(set ast.SelectionSet) *gqlerror.Error {
	names := map[string]int{}
	width := 0
	var count func(set ast.SelectionSet, depth int) *gqlerror.Error
	count = func(set ast.SelectionSet, depth int) *gqlerror.Error {
		if depth > 64 {
			return nil // a cycle: validation refuses it
		}
		for _, sel := range set {
			if s.budget--; s.budget < 0 {
				return limitGQLError("fragments", shapeBudget, shapeBudget, "the document's fragments expand too far")
			}
			switch x := sel.(type) {
			case *ast.Field:
				name := x.Alias
				if name == "" {
					name = x.Name
				}
				if names[name]++; names[name] > maxRepeats {
					return limitGQLError("repeats", names[name], maxRepeats, "the field %q appears more than %d times in one selection set", name, maxRepeats)
				}
				if width++; width > maxWidth {
					return limitGQLError("width", width, maxWidth, "a selection set has more than %d fields (aliases and fragments included)", maxWidth)
				}
			case *ast.InlineFragment:
				if err := count(x.SelectionSet, depth+1); err != nil {
					return err
				}
			case *ast.FragmentSpread:
				if f := s.frags[x.Name]; f != nil {
					if err := count(f.SelectionSet, depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return count(set, 0)
}
