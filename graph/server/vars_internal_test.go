package server

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/switchyard/switchyard/graph/generated"
)

// decode reads a JSON value as the POST transport does.
func decode(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// TestVarCheckAcceptsOnlyWhatGqlparserReturnsUnchanged holds varCheck to
// its promise: whatever it accepts, gqlparser's VariableValues accepts and
// returns as it was given; and it does accept the common inputs, or the
// fast path would never run.
func TestVarCheckAcceptsOnlyWhatGqlparserReturnsUnchanged(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	c := newVarCheck(schema, nil)
	task := `{"agentId":"a","action":{"kind":"click","selector":"css:#go","params":{"n":1}}}`
	for _, tc := range []struct {
		typ, val string
		accept   bool // what varCheck must say
	}{
		{"SubmitTaskInput!", task, true},
		{"SubmitTaskInput!", `{"agentId":"a","priority":"HIGH","timeoutMs":5,"labels":[{"key":"k","value":"v"}],"dependsOn":["x",7],"retryPolicy":{"maxAttempts":3,"multiplier":1.5,"jitter":true},"deadline":"2030-01-01T00:00:00Z","lane":null}`, true},
		{"SubmitTaskInput!", `{"agentId":"a","priority":"high"}`, true}, // gqlparser compares enums ignoring case
		{"SubmitTaskInput!", `{"agentId":"a","__typename":"x"}`, true},
		{"SubmitTaskInput!", `{"agentId":"a","timeoutMs":"12"}`, true}, // gqlparser takes an integer string as Int
		{"SubmitTasksInput!", `{"items":[{"task":` + task + `},{"key":"b","task":` + task + `}],"parallelism":2}`, true},
		{"SubmitTasksInput!", `{"items":[]}`, true},
		{"[LabelInput!]!", `[{"key":"k","value":"v"}]`, true},
		{"[LabelInput!]", `[{"key":"k","value":"v"}]`, true},

		{"SubmitTaskInput!", `{"lane":"x"}`, false},                        // agentId must be defined
		{"SubmitTaskInput!", `{"agentId":null}`, false},                    // cannot be null
		{"SubmitTaskInput!", `{"agentId":"a","bogus":1}`, false},           // unknown field
		{"SubmitTaskInput!", `{"agentId":"a","priority":"URGENT"}`, false}, // not a Priority
		{"SubmitTaskInput!", `{"agentId":"a","timeoutMs":1.5}`, false},
		{"SubmitTaskInput!", `{"agentId":"a","timeoutMs":"soon"}`, false},
		{"SubmitTaskInput!", `{"agentId":"a","sessionReplay":"yes"}`, false},
		{"SubmitTaskInput!", `{"agentId":7}`, true}, // a json.Number is a string to gqlparser
		{"SubmitTaskInput!", `{"agentId":true}`, false},
		{"SubmitTaskInput!", `{"agentId":"a","dependsOn":"x"}`, false}, // gqlparser makes it a list: a change
		{"SubmitTaskInput!", `{"agentId":"a","labels":[null]}`, false},
		{"SubmitTaskInput!", `{"agentId":"a","retryPolicy":{}}`, false},
		{"SubmitTaskInput!", `[]`, false},
		{"SubmitTasksInput!", `{"items":[{"task":{"lane":"x"}}]}`, false},
		{"SubmitTasksInput!", `{"items":[null]}`, false},
		{"SubmitTasksInput!", `{}`, false},
	} {
		typ := parseType(t, tc.typ)
		val := decode(t, tc.val)
		got := c.accepts(typ, val)
		require.Equal(t, tc.accept, got, "%s %s", tc.typ, tc.val)
		if !got {
			continue
		}
		op := &ast.OperationDefinition{VariableDefinitions: ast.VariableDefinitionList{{Variable: "in", Type: typ, Definition: schema.Types[typ.Name()]}}}
		out, err := validator.VariableValues(schema, op, map[string]any{"in": decode(t, tc.val)})
		require.NoError(t, err, "%s %s", tc.typ, tc.val)
		require.Equal(t, val, out["in"], "gqlparser changed %s %s", tc.typ, tc.val)
		// And its placeholder is one gqlparser takes at once.
		_, err = validator.VariableValues(schema, op, map[string]any{"in": c.placeholder(typ)})
		require.NoError(t, err, "placeholder of %s", tc.typ)
	}
}

// parseType reads a GraphQL type reference such as [LabelInput!]!.
func parseType(t *testing.T, s string) *ast.Type {
	t.Helper()
	nonNull := len(s) > 0 && s[len(s)-1] == '!'
	if nonNull {
		s = s[:len(s)-1]
	}
	if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		return &ast.Type{Elem: parseType(t, s[1:len(s)-1]), NonNull: nonNull}
	}
	return &ast.Type{NamedType: s, NonNull: nonNull}
}

// TestEveryInputTypesPlaceholderPassesGqlparser: whichever input object a
// query's variable has, its placeholder is one gqlparser accepts, or a
// valid request would be refused once its query is cached.
func TestEveryInputTypesPlaceholderPassesGqlparser(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	c := newVarCheck(schema, nil)
	n := 0
	for name, def := range schema.Types {
		if def.Kind != ast.InputObject {
			continue
		}
		n++
		for _, typ := range []*ast.Type{
			{NamedType: name, NonNull: true},
			{Elem: &ast.Type{NamedType: name, NonNull: true}, NonNull: true},
		} {
			op := &ast.OperationDefinition{VariableDefinitions: ast.VariableDefinitionList{{Variable: "in", Type: typ, Definition: def}}}
			_, err := validator.VariableValues(schema, op, map[string]any{"in": c.placeholder(typ)})
			require.NoError(t, err, "placeholder of %s", typ)
		}
	}
	require.Greater(t, n, 10)
}

// TestHeldVariablesAreLeftOutOfGqlparsersCheckOnly: for a cached operation
// whose variables prepare holds back, the executor's cache gives gqlparser
// the document without their definitions (and only for that request's
// query), the cached document is not changed, and varSwap hands the rest
// of the request the cached document and operation with the real values.
func TestHeldVariablesAreLeftOutOfGqlparsersCheckOnly(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	cache := lru.New[*ast.QueryDocument](10)
	c := newVarCheck(schema, cache)
	query := `query Other { stats { at } }
mutation Submit($in: SubmitTaskInput!, $n: Int) { submitTask(input: $in) { id children(first: $n) { id } } }`
	doc, errs := gqlparser.LoadQueryWithRules(schema, query, nil)
	require.Empty(t, errs)
	cache.Add(context.Background(), query, doc)
	submit := doc.Operations.ForName("Submit")
	in := decode(t, `{"agentId":"a","action":{"kind":"click"}}`)
	params := &graphql.RawParams{Query: query, OperationName: "Submit", Variables: map[string]any{"in": in, "n": json.Number("3")}}
	ctx := c.prepare(context.Background(), params, false)

	got, ok := varCache{cache}.Get(ctx, query)
	require.True(t, ok)
	require.NotSame(t, doc, got)
	op := got.Operations.ForName("Submit")
	require.Len(t, op.VariableDefinitions, 1, "only $n is left for gqlparser")
	require.Equal(t, "n", op.VariableDefinitions[0].Variable)
	require.Same(t, submit.SelectionSet[0], op.SelectionSet[0])
	require.Same(t, doc.Operations.ForName("Other"), got.Operations.ForName("Other"))
	require.Len(t, submit.VariableDefinitions, 2, "the cached document is unchanged")
	again, _ := varCache{cache}.Get(c.prepare(context.Background(), &graphql.RawParams{Query: query, OperationName: "Submit", Variables: map[string]any{"in": in}}, false), query)
	require.Same(t, got, again, "one copy per operation and held variables")

	other, _ := varCache{cache}.Get(ctx, "query { stats { at } }")
	require.Nil(t, other, "another query is looked up as it is")
	plain, _ := varCache{cache}.Get(context.Background(), query)
	require.Same(t, doc, plain, "a request that holds nothing back gets the cached document")

	vars, err := validator.VariableValues(schema, op, params.Variables)
	require.NoError(t, err)
	oc := &graphql.OperationContext{Doc: got, Operation: op, OperationName: "Submit", Variables: vars}
	require.Nil(t, varSwap{}.MutateOperationContext(ctx, oc))
	require.Same(t, doc, oc.Doc)
	require.Same(t, submit, oc.Operation)
	require.Equal(t, in, oc.Variables["in"])
	require.Equal(t, int64(3), oc.Variables["n"])
}
