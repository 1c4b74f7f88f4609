package model

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// goid is the id of the calling goroutine.
func goid() int {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _ := strconv.Atoi(s[:strings.IndexByte(s, ' ')])
	return id
}

func leaf(name string) *ast.Field { return &ast.Field{Name: name, Alias: name} }

func object(name string, sel ...ast.Selection) *ast.Field {
	return &ast.Field{Name: name, Alias: name, SelectionSet: sel}
}

// marshalOn runs a list of n through marshal and reports, for each
// element, whether it was marshalled on the caller's goroutine.
func marshalOn(t *testing.T, sel ast.SelectionSet, n int,
	marshal func(context.Context, ast.SelectionSet, int, int64, bool, func(context.Context, int) graphql.Marshaler) graphql.Array,
) (onCaller []bool) {
	t.Helper()
	caller := goid()
	goroutines := make([]int, n)
	ret := marshal(context.Background(), sel, n, 0, false, func(ctx context.Context, i int) graphql.Marshaler {
		if fc := graphql.GetFieldContext(ctx); fc == nil || fc.Index == nil || *fc.Index != i {
			t.Errorf("element %d: its field context has no index %d", i, i)
		}
		goroutines[i] = goid()
		return graphql.MarshalInt(i)
	})
	var out bytes.Buffer
	ret.MarshalGQL(&out)
	want := "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]"
	if n > 0 {
		var parts []string
		for i := range n {
			parts = append(parts, strconv.Itoa(i))
		}
		want = "[" + strings.Join(parts, ",") + "]"
	}
	if out.String() != want {
		t.Errorf("marshalled %s, want %s", out.String(), want)
	}
	for _, g := range goroutines {
		onCaller = append(onCaller, g == caller)
	}
	return onCaller
}

func TestMarshalListInPlaceOnlyForShallowSelections(t *testing.T) {
	spread := func(def *ast.FragmentDefinition, dirs ...*ast.Directive) *ast.FragmentSpread {
		return &ast.FragmentSpread{Name: "f", Definition: def, Directives: dirs}
	}
	leaves := &ast.FragmentDefinition{Name: "f", SelectionSet: ast.SelectionSet{leaf("id"), leaf("state")}}
	deeper := &ast.FragmentDefinition{Name: "f", SelectionSet: ast.SelectionSet{object("dependencies", leaf("id"))}}
	deferred := &ast.Directive{Name: "defer"}
	for _, tc := range []struct {
		name    string
		sel     ast.SelectionSet
		inPlace bool
	}{
		{"the CLI's selection", ast.SelectionSet{leaf("index"), object("task", leaf("id"), leaf("state")), object("error", leaf("code"), leaf("message"))}, true},
		{"leaves only", ast.SelectionSet{leaf("index"), leaf("key")}, true},
		{"a fragment of leaves", ast.SelectionSet{object("task", spread(leaves)), &ast.InlineFragment{SelectionSet: ast.SelectionSet{object("error", leaf("code"))}}}, true},
		{"a task's dependencies", ast.SelectionSet{object("task", leaf("id"), object("dependencies", leaf("id")))}, false},
		{"an error's counts", ast.SelectionSet{object("error", object("counts", leaf("queued")))}, false},
		{"a fragment of objects", ast.SelectionSet{object("task", spread(deeper))}, false},
		{"an inline fragment of objects", ast.SelectionSet{object("task", &ast.InlineFragment{SelectionSet: ast.SelectionSet{object("children", leaf("id"))}})}, false},
		{"an unresolved fragment", ast.SelectionSet{object("task", spread(nil))}, false},
		{"a deferred fragment", ast.SelectionSet{object("task", spread(leaves, deferred))}, false},
		{"a deferred inline fragment", ast.SelectionSet{&ast.InlineFragment{Directives: ast.DirectiveList{deferred}, SelectionSet: ast.SelectionSet{leaf("index")}}}, false},
	} {
		onCaller := marshalOn(t, tc.sel, 5, MarshalList)
		for i, on := range onCaller {
			if on != tc.inPlace {
				t.Errorf("%s: element %d on the caller's goroutine: %v, want %v", tc.name, i, on, tc.inPlace)
			}
		}
	}
}

// TestMarshalListRecoversAsGqlgenDoes: an element that panics is a null and
// an error at its path, in place as on gqlgen's goroutines.
func TestMarshalListRecoversAsGqlgenDoes(t *testing.T) {
	run := func(marshal func(context.Context, int, func(context.Context, int) graphql.Marshaler) graphql.Array) (string, gqlerror.List) {
		quiet := func(_ context.Context, err any) error { return fmt.Errorf("internal system error: %v", err) }
		ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, quiet)
		ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{Field: graphql.CollectedField{Field: &ast.Field{Alias: "items"}}})
		ret := marshal(ctx, 3, func(ctx context.Context, i int) graphql.Marshaler {
			if i == 1 {
				panic("element 1")
			}
			return graphql.MarshalInt(i)
		})
		var out bytes.Buffer
		ret.MarshalGQL(&out)
		return out.String(), graphql.GetErrors(ctx)
	}
	sel := ast.SelectionSet{leaf("index")}
	gotOut, gotErrs := run(func(ctx context.Context, n int, f func(context.Context, int) graphql.Marshaler) graphql.Array {
		return MarshalList(ctx, sel, n, 0, false, f)
	})
	wantOut, wantErrs := run(func(ctx context.Context, n int, f func(context.Context, int) graphql.Marshaler) graphql.Array {
		return graphql.MarshalSliceConcurrently(ctx, n, 0, false, f)
	})
	if gotOut != wantOut || gotErrs.Error() != wantErrs.Error() || len(gotErrs) != 1 || gotErrs[0].Path.String() != wantErrs[0].Path.String() {
		t.Errorf("in place: %s %v (%v), want %s %v (%v)", gotOut, gotErrs, gotErrs[0].Path, wantOut, wantErrs, wantErrs[0].Path)
	}
}

// TestListsMarshalledInPlaceSelectNothingConcurrent holds MarshalList's
// premise where the generated code uses it: the elements' fields, and the
// fields of the objects they hold, resolve concurrently only fields that
// are objects (which a shallow selection cannot reach).
func TestListsMarshalledInPlaceSelectNothingConcurrent(t *testing.T) {
	src, err := os.ReadFile("../generated/tasks.generated.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte("marshalNSubmitTaskResult2ᚕ")) ||
		!regexp.MustCompile(`(?s)func \(ec \*executionContext\) marshalNSubmitTaskResult2ᚕ[^\n]*\n\tret := model\.MarshalList\(ctx, sel, `).Match(src) {
		t.Fatal("the generated code does not marshal SubmitTaskResult lists with MarshalList: run go generate ./graph")
	}
	schema := loadSchema(t)
	var all []byte
	files, _ := os.ReadDir("../generated")
	for _, f := range files {
		b, err := os.ReadFile("../generated/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	// The element type, and the object types of its fields.
	types := []string{"SubmitTaskResult"}
	for _, f := range schema.Types["SubmitTaskResult"].Fields {
		if def := schema.Types[f.Type.Name()]; def.Kind == ast.Object {
			types = append(types, def.Name)
		}
	}
	var concurrent []string
	for _, typ := range types {
		body := funcBody(t, all, "_"+typ+"(ctx context.Context, sel ast.SelectionSet")
		cases := bytes.Split(body, []byte("\n\t\tcase \""))
		if len(cases) < 2 {
			t.Fatalf("_%s: no fields found in the generated code", typ)
		}
		for _, c := range cases[1:] {
			name, code, _ := bytes.Cut(c, []byte(`"`))
			if !bytes.Contains(code, []byte("Concurrently")) {
				continue
			}
			field := schema.Types[typ].Fields.ForName(string(name))
			if field == nil || typ == "SubmitTaskResult" || schema.Types[field.Type.Name()].IsLeafType() {
				t.Errorf("%s.%s resolves concurrently: a shallow selection of SubmitTaskResult lists reaches it", typ, name)
			}
			concurrent = append(concurrent, typ+"."+string(name))
		}
	}
	t.Logf("resolved concurrently: %v", concurrent)
}

func funcBody(t *testing.T, src []byte, head string) []byte {
	t.Helper()
	i := bytes.Index(src, []byte("func (ec *executionContext) "+head))
	if i < 0 {
		t.Fatalf("no generated %s", head)
	}
	j := bytes.Index(src[i:], []byte("\n}\n"))
	return src[i : i+j]
}
