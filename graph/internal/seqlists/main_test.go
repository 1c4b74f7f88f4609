package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const generated = `package generated

func (ec *executionContext) marshalNThing2ᚕᚖThingᚄ(ctx context.Context, sel ast.SelectionSet, v []*Thing) graphql.Marshaler {
	ret := graphql.MarshalSliceConcurrently(ctx, len(v), 0, false, func(ctx context.Context, i int) graphql.Marshaler {
		return ec.marshalNThing2ᚖThing(ctx, sel, v[i])
	})
	return ret
}

func (ec *executionContext) marshalNOther2ᚕᚖOtherᚄ(ctx context.Context, sel ast.SelectionSet, v []*Other) graphql.Marshaler {
	ret := graphql.MarshalSliceConcurrently(ctx, len(v), 0, false, func(ctx context.Context, i int) graphql.Marshaler {
		return ec.marshalNOther2ᚖOther(ctx, sel, v[i])
	})
	return ret
}
`

func TestRewriteTouchesOnlyTheFunctionsNamed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "x.generated.go")
	if err := os.WriteFile(file, []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second run finds the call rewritten and leaves it
		if err := rewrite(file, []string{"marshalNThing2ᚕ"}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		thing, other, _ := strings.Cut(string(got), "marshalNOther2ᚕ")
		if !strings.Contains(thing, "ret := model.MarshalList(ctx, sel, len(v), 0, false, func") || strings.Contains(thing, "MarshalSliceConcurrently") {
			t.Fatalf("Thing's list was not rewritten:\n%s", thing)
		}
		if !strings.Contains(other, "graphql.MarshalSliceConcurrently(ctx, len(v)") {
			t.Fatalf("Other's list was rewritten:\n%s", other)
		}
	}
}

func TestRewriteRefusesWhatItDoesNotFind(t *testing.T) {
	file := filepath.Join(t.TempDir(), "x.generated.go")
	if err := os.WriteFile(file, []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, funcs := range [][]string{{"marshalNNothing2ᚕ"}, {"marshalN"}, {"marshalNThing2ᚕ", "marshalNGone"}} {
		if err := rewrite(file, funcs); err == nil {
			t.Errorf("%v: no error", funcs)
		}
		if got, _ := os.ReadFile(file); string(got) != generated {
			t.Errorf("%v: the file changed", funcs)
		}
	}
}
