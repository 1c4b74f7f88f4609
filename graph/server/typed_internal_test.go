package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/switchyard/switchyard/graph/generated"
	"github.com/switchyard/switchyard/graph/model"
)

// jsonGen writes random JSON texts of a schema's input types: mostly what
// clients send, often something the typed reading must leave to the
// generic path (nulls, escapes, white space, unknown or repeated fields,
// values of another type, single values for lists).
type jsonGen struct {
	schema *ast.Schema
	rng    *rand.Rand
}

func (g *jsonGen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *jsonGen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

// ws is white space between tokens, now and then.
func (g *jsonGen) ws() string {
	if g.chance(0.03) {
		return g.pick(" ", "\n\t", "  ")
	}
	return ""
}

func (g *jsonGen) value(typ *ast.Type, depth int) string {
	if g.chance(0.01) || !typ.NonNull && g.chance(0.02) {
		return "null"
	}
	if typ.Elem != nil {
		if g.chance(0.03) {
			return g.value(typ.Elem, depth+1) // a single value where a list is expected
		}
		n := g.rng.IntN(4)
		if depth == 0 {
			n = 1 + g.rng.IntN(5)
		}
		parts := make([]string, n)
		for i := range parts {
			parts[i] = g.ws() + g.value(typ.Elem, depth+1) + g.ws()
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	def := g.schema.Types[typ.NamedType]
	switch def.Kind {
	case ast.InputObject:
		var parts []string
		field := func(name, val string) {
			parts = append(parts, g.ws()+`"`+name+`"`+g.ws()+":"+g.ws()+val+g.ws())
		}
		for _, f := range def.Fields {
			if f.Type.NonNull && g.chance(0.99) || g.chance(0.35) {
				field(f.Name, g.value(f.Type, depth+1))
			}
		}
		switch {
		case g.chance(0.01):
			field("__typename", `"`+def.Name+`"`)
		case g.chance(0.01):
			field("bogus", "1")
		case g.chance(0.01) && len(def.Fields) > 0:
			f := def.Fields[g.rng.IntN(len(def.Fields))]
			field(f.Name, g.value(f.Type, depth+1)) // repeated (or first) field
		}
		g.rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	case ast.Enum:
		if g.chance(0.03) {
			return g.pick(`"NOT_A_VALUE"`, `"high"`, `["HIGH"]`, `7`, `"HI\u0047H"`)
		}
		return `"` + def.EnumValues[g.rng.IntN(len(def.EnumValues))].Name + `"`
	}
	odd := g.chance(0.03)
	switch def.Name {
	case "String", "ID":
		if odd {
			return g.pick(`7`, `7.5`, `true`, `["x"]`, `{}`, `"a\"b"`, `"\u00e9"`, `"tab\there"`, "\"\x01\"", "\"\xff\"", `-0`)
		}
		return g.pick(`""`, `"a"`, `"agent-7"`, `"css:#go"`, `"héllo"`, `"https://example.com/hook"`, `"😀"`)
	case "Int":
		if odd {
			return g.pick(`1e3`, `1.5`, `"9"`, `"x"`, `99999999999999999999`, `true`, `-0`, `{}`)
		}
		return g.pick(`7`, `0`, `-3`, `12`, `86400000`, `1099511627776`)
	case "Float":
		if odd {
			return g.pick(`"4.5"`, `1e400`, `false`, `"y"`)
		}
		return g.pick(`1.5`, `2`, `0`, `-2.5e2`, `3E-1`)
	case "Boolean":
		if odd {
			return g.pick(`"true"`, `1`, `tru`)
		}
		return g.pick(`true`, `false`)
	case "Time":
		if odd {
			return g.pick(`"tomorrow"`, `5`, `""`, `"2030-01-02"`)
		}
		return g.pick(`"2030-01-02T03:04:05Z"`, `"2030-01-02T03:04:05.123+02:00"`)
	case "JSON":
		if odd {
			return g.pick(`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{ "a": 1 }`, `{"t":"a\"b"}`, `{"t":"héllo"}`, `{"t":"\u0041"}`, `[]`, `"plain"`, `3`, `{"n":01}`)
		}
		return g.pick(`{"n":1}`, `{"url":"https://example.com"}`, `{"a":1,"b":[true,null,1.5,"x"]}`, `{}`, `{"t":"<b>&"}`,
			`{"x":{"y":[{"z":-0.5e3}]},"y":false}`, `{"text":"hello","n":7}`)
	}
	panic("no generator for " + def.Name)
}

// typedChecker compares the typed reading of a SubmitTasksInput! (or,
// with one, SubmitTaskInput!) variable with the generic one.
type typedChecker struct {
	schema *ast.Schema
	check  *varCheck
	typ    *ast.Type
	op     *ast.OperationDefinition
	one    bool
}

func newTypedChecker() *typedChecker { return newTypedCheckerOf(submitTasksInput) }

func newTypedCheckerOf(name string) *typedChecker {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	typ := &ast.Type{NamedType: name, NonNull: true}
	return &typedChecker{
		schema: schema, check: newVarCheck(schema, nil), typ: typ, one: name == submitTaskInput,
		op: &ast.OperationDefinition{VariableDefinitions: ast.VariableDefinitionList{{Variable: "in", Type: typ, Definition: schema.Types[name]}}},
	}
}

// decode reads text typed as the checker's type.
func (c *typedChecker) decode(text string) (typed any, end int, ok bool) {
	if c.one {
		return model.DecodeSubmitTaskJSON([]byte(text))
	}
	return model.DecodeSubmitTasksJSON([]byte(text))
}

// compare reads text (a variable's value) both ways; when the typed
// reading takes it, everything the generic path does with it must succeed
// and give the same input. It reports whether the typed reading took it.
func (c *typedChecker) compare(t testing.TB, text string) bool {
	typed, end, ok := c.decode(text)
	if !ok {
		return false
	}
	// The body decoder's fast path reads it, to the same end: nothing
	// goes to encoding/json.
	p := bodyParser{b: []byte(text), keys: testBodyKeys}
	tree, ok := p.value()
	if !ok || p.i != end {
		t.Fatalf("%s: read typed to %d, but by the body decoder %v to %d", text, end, ok, p.i)
	}
	if !c.check.accepts(c.typ, tree) {
		t.Fatalf("%s: read typed, but varCheck does not vouch for it", text)
	}
	// Fresh trees: gqlparser may write into what it checks.
	out, err := validator.VariableValues(c.schema, c.op, map[string]any{"in": reread(t, text)})
	if err != nil {
		t.Fatalf("%s: read typed, but gqlparser refuses it: %v", text, err)
	}
	if !reflect.DeepEqual(out["in"], reread(t, text)) {
		t.Fatalf("%s: read typed, but gqlparser changes it", text)
	}
	ctx := graphql.WithPathContext(context.Background(), graphql.NewPathWithField("input"))
	if c.one {
		compareUnmarshalled[model.SubmitTaskInput](t, ctx, text, tree, typed)
	} else {
		compareUnmarshalled[model.SubmitTasksInput](t, ctx, text, tree, typed)
	}
	return true
}

// compareUnmarshalled unmarshals tree (the generic value) and typed (the
// typed reading of text) into a T each and requires the same.
func compareUnmarshalled[T any, PT interface {
	*T
	graphql.ContextUnmarshaler
	graphql.ContextMarshaler
}](t testing.TB, ctx context.Context, text string, tree, typed any) {
	var want, got T
	if err := PT(&want).UnmarshalGQLContext(ctx, tree); err != nil {
		t.Fatalf("%s: read typed, but unmarshalling the generic value fails: %v", text, err)
	}
	if err := PT(&got).UnmarshalGQLContext(ctx, typed); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n typed   %s\n generic %s", text, show(PT(&got)), show(PT(&want)))
	}
}

func reread(t testing.TB, text string) any {
	p := bodyParser{b: []byte(text), keys: testBodyKeys}
	p.ws()
	v, ok := p.value()
	if !ok {
		t.Fatalf("%s: not read", text)
	}
	return v
}

func show(in graphql.ContextMarshaler) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", must(writeInput(in)))
	return b.String()
}

func writeInput(in graphql.ContextMarshaler) (string, error) {
	var b strings.Builder
	err := in.MarshalGQLContext(context.Background(), &b)
	return b.String(), err
}

func must(s string, err error) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// TestTypedSubmitTasksMatchesTheGenericPath holds the typed reading of a
// submitTasks input (model.DecodeSubmitTasksJSON) to the path it spares:
// over thousands of random inputs, whatever it takes, the body decoder
// reads, varCheck vouches for, gqlparser returns unchanged, and the
// generic unmarshalling gives field for field (its errors, for what it
// does not take, stay the generic path's); and it takes most of the
// common inputs, or it would never run.
func TestTypedSubmitTasksMatchesTheGenericPath(t *testing.T) {
	t.Parallel()
	c := newTypedChecker()
	g := &jsonGen{schema: c.schema, rng: rand.New(rand.NewPCG(17, 5))}
	typ := &ast.Type{NamedType: submitTasksInput, NonNull: true}
	var took int
	const n = 24000
	for range n {
		if c.compare(t, g.value(typ, 0)) {
			took++
		}
	}
	t.Logf("read typed: %d of %d", took, n)
	require.Greater(t, took, n/10, "the typed reading takes too few inputs to be exercised")
	for _, text := range []string{
		string(benchItems(100)),
		`{"items":[{"key":"a","task":{"agentId":"x","priority":"HIGH","queueMode":"INTERRUPT","exhausted":"PARK","sessionReplay":true,"sessionMaxInFlight":3,` +
			`"dependsOn":["b"],"labels":[{"key":"k","value":"v"}],"retryPolicy":{"maxAttempts":3,"backoffMs":10,"multiplier":1.5,"maxBackoffMs":100,"jitter":true},` +
			`"deadline":"2030-01-02T03:04:05Z","timeoutMs":5000,"webhookUrl":"https://example.com/h","idempotencyKey":"i","lane":"main","sessionKey":"s",` +
			`"instruction":"go","tabId":"t","instanceId":"n","parentId":"p","action":{"kind":"click","ref":"e1","selector":"css:#go","params":{"a":[1,{"b":null}]}}}},` +
			`{"key":"b","task":{"agentId":"x"}}],"parallelism":2,"webhookUrl":"https://example.com/b"}`,
	} {
		require.True(t, c.compare(t, text), "not read typed: %s", text)
	}
}

// TestTypedSubmitTaskMatchesTheGenericPath is the same for a submitTask's
// input (model.DecodeSubmitTaskJSON).
func TestTypedSubmitTaskMatchesTheGenericPath(t *testing.T) {
	t.Parallel()
	c := newTypedCheckerOf(submitTaskInput)
	g := &jsonGen{schema: c.schema, rng: rand.New(rand.NewPCG(23, 7))}
	var took int
	const n = 24000
	for range n {
		if c.compare(t, g.value(c.typ, 0)) {
			took++
		}
	}
	t.Logf("read typed: %d of %d", took, n)
	require.Greater(t, took, n/10, "the typed reading takes too few inputs to be exercised")
	for _, text := range []string{
		`{"action":{"kind":"click","params":{"n":7},"selector":"css:#go"},"agentId":"bench-7","labels":[{"key":"bench","value":"1"}]}`,
		`{"agentId":"x","priority":"HIGH","queueMode":"INTERRUPT","exhausted":"PARK","sessionReplay":true,"sessionMaxInFlight":3,` +
			`"dependsOn":["b"],"labels":[{"key":"k","value":"v"}],"retryPolicy":{"maxAttempts":3,"backoffMs":10,"multiplier":1.5,"maxBackoffMs":100,"jitter":true},` +
			`"deadline":"2030-01-02T03:04:05Z","timeoutMs":5000,"webhookUrl":"https://example.com/h","idempotencyKey":"i","lane":"main","sessionKey":"s",` +
			`"instruction":"go","tabId":"t","instanceId":"n","parentId":"p","action":{"kind":"click","ref":"e1","selector":"css:#go","params":{"a":[1,{"b":null}]}}}`,
	} {
		require.True(t, c.compare(t, text), "not read typed: %s", text)
	}
}

// FuzzTypedSubmitTask is TestTypedSubmitTaskMatchesTheGenericPath's
// comparison over fuzzed texts.
func FuzzTypedSubmitTask(f *testing.F) {
	c := newTypedCheckerOf(submitTaskInput)
	g := &jsonGen{schema: c.schema, rng: rand.New(rand.NewPCG(5, 11))}
	for range 40 {
		f.Add(g.value(c.typ, 0))
	}
	f.Fuzz(func(t *testing.T, text string) {
		c.compare(t, text)
	})
}

// benchItems is the value of the variable in batchBody.
func benchItems(n int) []byte {
	body := string(batchBody(n))
	return []byte(body[strings.Index(body, `"variables":{"in":`)+len(`"variables":{"in":`) : len(body)-2])
}

// FuzzTypedSubmitTasks is TestTypedSubmitTasksMatchesTheGenericPath's
// comparison over fuzzed texts.
func FuzzTypedSubmitTasks(f *testing.F) {
	c := newTypedChecker()
	g := &jsonGen{schema: c.schema, rng: rand.New(rand.NewPCG(3, 9))}
	for range 40 {
		f.Add(g.value(&ast.Type{NamedType: submitTasksInput, NonNull: true}, 0))
	}
	f.Add(string(benchItems(3)))
	f.Fuzz(func(t *testing.T, text string) {
		c.compare(t, text)
	})
}

// mapCache is a query cache for tests.
type mapCache map[string]*ast.QueryDocument

func (m mapCache) Get(_ context.Context, key string) (*ast.QueryDocument, bool) {
	d, ok := m[key]
	return d, ok
}

func (m mapCache) Add(_ context.Context, key string, d *ast.QueryDocument) { m[key] = d }

// TestTypedReadingNeedsItsOperation checks when the body decoder reads a
// variable typed: a cached query given before the variables, whose
// operation (the one named, wherever the name is) declares it
// SubmitTasksInput! or SubmitTaskInput!; else the body is read as before.
func TestTypedReadingNeedsItsOperation(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	cache := mapCache{}
	vars := newVarCheck(schema, cache)
	const two = `mutation A ($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted } } ` +
		`mutation B ($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`
	const one = `mutation SubmitBatch ($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted refused } }`
	for _, q := range []string{two, one} {
		doc, err := gqlparser.LoadQueryWithRules(schema, q, nil)
		require.Nil(t, err)
		cache.Add(context.Background(), q, doc)
	}
	in := string(benchItems(2))
	task := `{"agentId":"a"}`
	quote := func(s string) string { return fmt.Sprintf("%q", s) }
	for _, tc := range []struct {
		body  string
		typed bool
	}{
		{`{"query":` + quote(one) + `,"variables":{"in":` + in + `}}`, true},
		{`{"query":` + quote(one) + `,"operationName":"SubmitBatch","variables":{"in":` + in + `}}`, true},
		{`{"query":` + quote(one) + `,"variables":{"in":` + in + `},"operationName":"SubmitBatch"}`, true},
		{`{"query":` + quote(two) + `,"operationName":"A","variables":{"in":` + in + `}}`, true},
		{`{"query":` + quote(one) + `,"variables":{"other":` + in + `,"in":` + in + `},"extensions":{"in":` + in + `}}`, true},
		{`{"variables":{"in":` + in + `},"query":` + quote(one) + `}`, false},                                     // the query after the variables
		{`{"query":` + quote(one+" ") + `,"variables":{"in":` + in + `}}`, false},                                 // not cached
		{`{"query":` + quote(two) + `,"operationName":"B","variables":{"in":` + task + `}}`, true},                // a submitTask's input
		{`{"query":` + quote(two) + `,"operationName":"B","variables":{"in":` + in + `}}`, false},                 // not a SubmitTaskInput: the generic path
		{`{"query":` + quote(two) + `,"operationName":"A","variables":{"in":` + task + `}}`, false},               // not a SubmitTasksInput
		{`{"query":` + quote(two) + `,"variables":{"in":` + in + `},"operationName":"B"}`, false},                 // no operation named yet, then B
		{`{"query":` + quote(two) + `,"operationName":"A","variables":{"in":` + in + `,"in":` + in + `}}`, false}, // repeated
		{`{"query":` + quote(two) + `,"operationName":"A","variables":{"in":{"items":[null]}}}`, false},           // not sure: the generic path
		{`{"query":` + quote(one) + `,"variables":{"in":` + in + `},"operationName":"Other"}`, false},             // no such operation
	} {
		var got graphql.RawParams
		typed, err := decodeParamsTyped(context.Background(), []byte(tc.body), testBodyKeys, vars, &got)
		require.NoError(t, err, tc.body)
		require.Equal(t, tc.typed, typed, tc.body)
		want, err := refParams([]byte(tc.body))
		require.NoError(t, err)
		if !typed {
			require.Equal(t, want, got, tc.body)
			continue
		}
		// All but the typed variable as before; that one as the generic
		// path unmarshals it.
		if v, ok := got.Variables["in"].(*model.SubmitTaskJSON); ok {
			var gotIn, wantIn model.SubmitTaskInput
			require.NoError(t, gotIn.UnmarshalGQLContext(context.Background(), v))
			require.NoError(t, wantIn.UnmarshalGQLContext(context.Background(), want.Variables["in"]))
			require.Equal(t, wantIn, gotIn)
		} else {
			v, ok := got.Variables["in"].(*model.SubmitTasksJSON)
			require.True(t, ok, tc.body)
			var gotIn, wantIn model.SubmitTasksInput
			require.NoError(t, gotIn.UnmarshalGQLContext(context.Background(), v))
			require.NoError(t, wantIn.UnmarshalGQLContext(context.Background(), want.Variables["in"]))
			require.Equal(t, wantIn, gotIn)
		}
		got.Variables["in"], want.Variables["in"] = nil, nil
		require.Equal(t, want, got, tc.body)
	}
}
