package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/internal/poison"
)

// The input types unmarshalled by hand (input.go), by their schema names.
var handInputs = map[string]reflect.Type{
	"SubmitTasksInput": reflect.TypeFor[SubmitTasksInput](),
	"BatchItemInput":   reflect.TypeFor[BatchItemInput](),
	"SubmitTaskInput":  reflect.TypeFor[SubmitTaskInput](),
	"ActionInput":      reflect.TypeFor[ActionInput](),
	"RetryPolicyInput": reflect.TypeFor[RetryPolicyInput](),
	"LabelInput":       reflect.TypeFor[LabelInput](),
}

// handUnmarshal runs a hand-written unmarshaller as gqlgen's generated
// code calls it: on a fresh value.
func handUnmarshal(ctx context.Context, name string, v any) (any, error) {
	p := reflect.New(handInputs[name])
	err := p.Interface().(graphql.ContextUnmarshaler).UnmarshalGQLContext(ctx, v)
	return p.Elem().Interface(), err
}

// TestInputUnmarshalMatchesTheSchema holds the hand-written unmarshallers
// to a reference that reads the schema (graph/schema) the way gqlgen's
// generated unmarshaller does: field by field in the schema's order, the
// schema's defaults, gqlgen's scalar functions. Thousands of random inputs,
// valid and not (a field the schema gained and input.go did not would be
// set by the reference alone), give the same value, or the same error with
// the same path.
func TestInputUnmarshalMatchesTheSchema(t *testing.T) {
	ref := newRefDecoder(t, loadSchema(t))
	compareWithReference(t, ref, handUnmarshal, 4000)
}

// TestInputEnumsAreTheSchemas checks that the enum tables of input.go name
// exactly the values the schema defines.
func TestInputEnumsAreTheSchemas(t *testing.T) {
	schema := loadSchema(t)
	for name, names := range map[string][]string{
		"Priority": keys(priorities), "QueueMode": keys(queueModes), "Exhausted": keys(exhaustions),
	} {
		var want []string
		for _, v := range schema.Types[name].EnumValues {
			want = append(want, v.Name)
		}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("%s: input.go knows %v, the schema defines %v", name, names, want)
		}
	}
}

// TestInputUnmarshalAllocations bounds what a typical batch item costs.
func TestInputUnmarshalAllocations(t *testing.T) {
	var items []any
	for i := range 100 {
		items = append(items, map[string]any{"task": map[string]any{
			"agentId": "bench", "action": map[string]any{"kind": "click", "selector": "css:#go", "params": map[string]any{"n": json.Number(fmt.Sprint(i))}},
		}})
	}
	v := map[string]any{"items": items}
	allocs := testing.AllocsPerRun(20, func() {
		var in SubmitTasksInput
		if err := in.UnmarshalGQLContext(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	})
	// Two for the batch, and the action's params (model.UnmarshalJSON) per item.
	if allocs > 2+100*1 {
		t.Errorf("%.0f allocations for a batch of 100, want at most %d", allocs, 2+100)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func loadSchema(t testing.TB) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob("../schema/*.graphqls")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files: %v", err)
	}
	var sources []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	schema, gerr := gqlparser.LoadSchema(sources...)
	if gerr != nil {
		t.Fatalf("loading the schema: %v", gerr)
	}
	return schema
}

// compareWithReference unmarshals n random values of each hand-written
// input type with unmarshal and with ref, and fails on any difference.
func compareWithReference(t *testing.T, ref *refDecoder, unmarshal func(context.Context, string, any) (any, error), n int) {
	t.Helper()
	names := keys(handInputs)
	rng := rand.New(rand.NewPCG(21, 13))
	gen := &inputGen{schema: ref.schema, rng: rng}
	ctx := graphql.WithPathContext(context.Background(), graphql.NewPathWithField("input"))
	var failed int
	for _, name := range names {
		def := ref.schema.Types[name]
		if def == nil || def.Kind != ast.InputObject {
			t.Fatalf("%s is not an input object of the schema", name)
		}
		for i := range n {
			v := gen.value(&ast.Type{NamedType: name, NonNull: true}, 0, i%7 == 0)
			want, wantErr := ref.decode(ctx, &ast.Type{NamedType: name, NonNull: true}, v, handInputs[name])
			got, gotErr := unmarshal(ctx, name, v)
			if d := diffErrors(gotErr, wantErr); d != "" {
				t.Errorf("%s %s: %s", name, show(v), d)
				failed++
			} else if wantErr == nil && !reflect.DeepEqual(got, want.Interface()) {
				t.Errorf("%s %s:\n got %s\nwant %s", name, show(v), show(got), show(want.Interface()))
				failed++
			}
			if failed > 5 {
				t.FailNow()
			}
		}
	}
}

func diffErrors(got, want error) string {
	switch {
	case got == nil && want == nil:
		return ""
	case got == nil || want == nil:
		return fmt.Sprintf("error %v, want %v", got, want)
	}
	var g, w *gqlerror.Error
	if !errors.As(got, &g) || !errors.As(want, &w) {
		return fmt.Sprintf("error %#v, want %#v", got, want)
	}
	if g.Message != w.Message || g.Path.String() != w.Path.String() {
		return fmt.Sprintf("error %q at %s, want %q at %s", g.Message, g.Path, w.Message, w.Path)
	}
	return ""
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// refDecoder unmarshals an input as gqlgen's generated code does, driven
// by the schema and the Go types' json tags.
type refDecoder struct {
	t      testing.TB
	schema *ast.Schema
	enums  map[string]map[string]any
}

func newRefDecoder(t testing.TB, schema *ast.Schema) *refDecoder {
	enums := map[string]map[string]any{}
	for name, m := range map[string]any{"Priority": priorities, "QueueMode": queueModes, "Exhausted": exhaustions} {
		enums[name] = map[string]any{}
		iter := reflect.ValueOf(m).MapRange()
		for iter.Next() {
			enums[name][iter.Key().String()] = iter.Value().Interface()
		}
	}
	return &refDecoder{t: t, schema: schema, enums: enums}
}

func (r *refDecoder) decode(ctx context.Context, typ *ast.Type, v any, goType reflect.Type) (reflect.Value, error) {
	if typ.Elem != nil {
		if !typ.NonNull && v == nil {
			return reflect.Zero(goType), nil
		}
		list := graphql.CoerceList(v)
		out := reflect.MakeSlice(goType, len(list), len(list))
		for i := range list {
			ctx := graphql.WithPathContext(ctx, graphql.NewPathWithIndex(i))
			e, err := r.decode(ctx, typ.Elem, list[i], goType.Elem())
			if err != nil {
				return reflect.Value{}, err
			}
			out.Index(i).Set(e)
		}
		return out, nil
	}
	def := r.schema.Types[typ.NamedType]
	nilable := goType.Kind() == reflect.Pointer || goType.Kind() == reflect.Slice
	if !typ.NonNull && nilable && v == nil {
		return reflect.Zero(goType), nil
	}
	base := goType
	if goType.Kind() == reflect.Pointer {
		base = goType.Elem()
	}
	var val reflect.Value
	var err error
	switch def.Kind {
	case ast.InputObject:
		val, err = r.object(ctx, def, v, base)
	case ast.Enum:
		var s string
		s, err = graphql.UnmarshalString(v)
		val = reflect.New(base).Elem()
		if x, ok := r.enums[def.Name][s]; ok {
			val.Set(reflect.ValueOf(x))
		}
	case ast.Scalar:
		var x any
		x, err = scalar(def.Name, v)
		if x == nil {
			r.t.Fatalf("no scalar function for %s", def.Name)
		}
		val = reflect.ValueOf(x).Convert(base)
	default:
		r.t.Fatalf("%s is not an input type", def.Name)
	}
	if goType.Kind() == reflect.Pointer {
		p := reflect.New(base)
		p.Elem().Set(val)
		val = p
	}
	return val, graphql.ErrorOnPath(ctx, err)
}

func (r *refDecoder) object(ctx context.Context, def *ast.Definition, v any, t reflect.Type) (reflect.Value, error) {
	out := reflect.New(t).Elem()
	goFields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		goFields[name] = f
	}
	for _, f := range def.Fields {
		if _, ok := goFields[f.Name]; !ok {
			r.t.Fatalf("%s.%s has no Go field in %s", def.Name, f.Name, t)
		}
	}
	if len(goFields) != len(def.Fields) {
		r.t.Fatalf("%s has %d fields in Go and %d in the schema", def.Name, len(goFields), len(def.Fields))
	}
	if v == nil {
		return out, nil
	}
	m := map[string]any{}
	for k, x := range v.(map[string]any) {
		m[k] = x
	}
	for _, f := range def.Fields {
		if _, present := m[f.Name]; !present && f.DefaultValue != nil {
			d, err := f.DefaultValue.Value(nil)
			if err != nil {
				r.t.Fatal(err)
			}
			m[f.Name] = d
		}
	}
	for _, f := range def.Fields {
		x, ok := m[f.Name]
		if !ok {
			continue
		}
		ctx := graphql.WithPathContext(ctx, graphql.NewPathWithField(f.Name))
		sf := goFields[f.Name]
		val, err := r.decode(ctx, f.Type, x, sf.Type)
		if err != nil {
			return out, err
		}
		out.FieldByIndex(sf.Index).Set(val)
	}
	return out, nil
}

// scalar unmarshals a scalar with the function gqlgen.yml binds to it.
func scalar(name string, v any) (any, error) {
	switch name {
	case "String":
		return graphql.UnmarshalString(v)
	case "ID":
		return graphql.UnmarshalID(v)
	case "Int":
		return graphql.UnmarshalInt(v)
	case "Float":
		return graphql.UnmarshalFloat(v)
	case "Boolean":
		return graphql.UnmarshalBoolean(v)
	case "Time":
		return graphql.UnmarshalTime(v)
	case "JSON":
		x, err := UnmarshalJSON(v)
		return x, err
	}
	return nil, nil
}

// inputGen makes random values for input types: mostly what gqlparser lets
// through (JSON-decoded variables, literal values), sometimes what a
// scalar refuses.
type inputGen struct {
	schema *ast.Schema
	rng    *rand.Rand
}

func (g *inputGen) chance(p float64) bool { return g.rng.Float64() < p }

// value makes a value of typ; full sets every field of an input object.
func (g *inputGen) value(typ *ast.Type, depth int, full bool) any {
	if !typ.NonNull && g.chance(0.08) {
		return nil
	}
	if typ.Elem != nil {
		if g.chance(0.1) {
			return g.value(typ.Elem, depth+1, full) // a single value where a list is expected
		}
		n := g.rng.IntN(4)
		if depth == 0 {
			n = g.rng.IntN(6)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = g.value(typ.Elem, depth+1, full)
		}
		return out
	}
	if typ.NonNull && g.chance(0.01) {
		return nil // gqlparser refuses it; the unmarshallers still agree
	}
	def := g.schema.Types[typ.NamedType]
	switch def.Kind {
	case ast.InputObject:
		m := map[string]any{}
		for _, f := range def.Fields {
			if full || (f.Type.NonNull && g.chance(0.95)) || g.chance(0.4) {
				m[f.Name] = g.value(f.Type, depth+1, full && depth < 3)
			}
		}
		if g.chance(0.05) {
			m["__typename"] = def.Name
		}
		return m
	case ast.Enum:
		switch {
		case g.chance(0.02):
			return "NOT_A_VALUE" // the enum's zero value, as gqlgen's tables give
		case g.chance(0.02):
			return []any{"HIGH"} // gqlgen's UnmarshalString refuses it
		}
		return def.EnumValues[g.rng.IntN(len(def.EnumValues))].Name
	}
	return g.scalar(def.Name)
}

func (g *inputGen) scalar(name string) any {
	// Now and then a value of the wrong type or form, which gqlgen's scalar
	// functions refuse (or gqlparser would have).
	odd := g.chance(0.03)
	pick := func(usual, unusual []any) any {
		if odd {
			return unusual[g.rng.IntN(len(unusual))]
		}
		return usual[g.rng.IntN(len(usual))]
	}
	notScalar := map[string]any{"not": "a scalar"}
	switch name {
	case "String", "ID":
		return pick([]any{"", "a", "agent-7", "css:#go", "héllo", "\u2028", "https://example.com/hook", json.Number("42")},
			[]any{notScalar, []any{"x"}, int64(-3), 2.5, true, nil})
	case "Int":
		return pick([]any{int64(7), json.Number("12"), int64(0), int64(86_400_000)},
			[]any{notScalar, json.Number("1e3"), 3.0, 2.5, "9", "x", int64(1) << 40, true, nil})
	case "Float":
		return pick([]any{1.5, json.Number("2"), int64(3)}, []any{notScalar, "4.5", "y", false, nil})
	case "Boolean":
		return pick([]any{true, false}, []any{notScalar, "true", int64(1), nil})
	case "Time":
		return pick([]any{"2030-01-02T03:04:05Z", "2030-01-02T03:04:05.123+02:00"}, []any{notScalar, "tomorrow", int64(5), ""})
	case "JSON":
		return pick([]any{
			map[string]any{"url": "https://example.com", "n": json.Number("1")},
			map[string]any{"text": "héllo \"quoted\" <b>", "list": []any{true, nil, 1.5}},
			map[string]any{},
		}, []any{[]any{json.Number("1"), "two"}, "plain", json.Number("3"), false, func() {}})
	}
	panic("no generator for scalar " + name)
}

// TestTypedJSONMatchesTheSchema holds DecodeSubmitTasksJSON (and
// DecodeSubmitTaskJSON, for a SubmitTaskInput) to the same reference: the model test's random SubmitTasksInput values, written as
// JSON (compact, sorted keys, as json.Marshal writes them), give, when it
// reads them, what the reference gives for the value, and never a value
// the reference refuses. graph/server's tests hold it to the body decoder
// and the variable check.
func TestTypedJSONMatchesTheSchema(t *testing.T) {
	t.Cleanup(poison.Set(false)) // each batch is read into the room the one before left
	ref := newRefDecoder(t, loadSchema(t))
	for _, name := range []string{"SubmitTasksInput", "SubmitTaskInput"} {
		t.Run(name, func(t *testing.T) { typedJSONMatchesTheSchema(t, ref, name) })
	}
}

func typedJSONMatchesTheSchema(t *testing.T, ref *refDecoder, name string) {
	gen := &inputGen{schema: ref.schema, rng: rand.New(rand.NewPCG(21, 17))}
	typ := &ast.Type{NamedType: name, NonNull: true}
	ctx := graphql.WithPathContext(context.Background(), graphql.NewPathWithField("input"))
	const n = 24000
	var took int
	for i := range n {
		v := gen.value(typ, 0, i%7 == 0)
		text, err := json.Marshal(v)
		if err != nil {
			continue // a func() among the JSON scalar's odd values
		}
		var typed any
		var end int
		var ok bool
		if name == "SubmitTaskInput" {
			typed, end, ok = DecodeSubmitTaskJSON(text)
		} else {
			typed, end, ok = DecodeSubmitTasksJSON(text)
		}
		if !ok {
			continue
		}
		took++
		if end != len(text) {
			t.Fatalf("%s: read to %d of %d", text, end, len(text))
		}
		// The reference reads what a JSON decoder gives for the text.
		dec := json.NewDecoder(strings.NewReader(string(text)))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			t.Fatal(err)
		}
		want, err := ref.decode(ctx, typ, tree, handInputs[name])
		if err != nil {
			t.Fatalf("%s: read, but the reference refuses it: %v", text, err)
		}
		got := reflect.New(handInputs[name])
		if err := got.Interface().(graphql.ContextUnmarshaler).UnmarshalGQLContext(ctx, typed); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Elem().Interface(), want.Interface()) {
			t.Fatalf("%s:\n got %s\nwant %s", text, show(got.Elem().Interface()), show(want.Interface()))
		}
		// The next batch is read into this one's room: it must come
		// back as if new.
		if b, ok := typed.(*SubmitTasksJSON); ok {
			b.Release()
		}
	}
	t.Logf("read typed: %d of %d", took, n)
	if took < n/20 {
		t.Fatalf("read typed only %d of %d: the test exercises too little", took, n)
	}
}

// TestAReleasedBatchsRoomKeepsNothing: the room a batch was read into
// goes back to the pool zeroed — slots, item list, labels and their lists
// — so that it holds on to none of the request's strings while it waits.
func TestAReleasedBatchsRoomKeepsNothing(t *testing.T) {
	t.Cleanup(poison.Set(false)) // the room as production gives it back
	text := []byte(`{"items":[` +
		`{"key":"a","task":{"agentId":"agent-1","lane":"l","instruction":"do","labels":[{"key":"k","value":"v"},{"key":"k2","value":"v2"}]}},` +
		`{"task":{"agentId":"agent-2","action":{"kind":"go","params":{"x":1}},"dependsOn":["a"],"labels":[{"key":"k","value":"v"}]}}]}`)
	v, _, ok := DecodeSubmitTasksJSON(text)
	if !ok {
		t.Fatal("not read typed")
	}
	r := v.room
	if r == nil || len(r.labels) != 3 || len(r.lptrs) != 3 {
		t.Fatalf("room %+v: want the items and their three labels in it", r)
	}
	if got := *v.in.Items[0].Task.Labels[1]; got != (LabelInput{Key: "k2", Value: "v2"}) {
		t.Fatalf("second label of the first item: %+v", got)
	}
	v.Release()
	if v.room != &releasedRoom || v.in.Items != nil {
		t.Fatal("a released input still points at its room")
	}
	for i, s := range r.slots[:cap(r.slots)] {
		if !reflect.ValueOf(s).IsZero() {
			t.Fatalf("slot %d kept %+v", i, s)
		}
	}
	for i, p := range r.items[:cap(r.items)] {
		if p != nil {
			t.Fatalf("item pointer %d kept", i)
		}
	}
	for i, l := range r.labels[:cap(r.labels)] {
		if l != (LabelInput{}) {
			t.Fatalf("label %d kept %+v", i, l)
		}
	}
	for i, p := range r.lptrs[:cap(r.lptrs)] {
		if p != nil {
			t.Fatalf("label pointer %d kept", i)
		}
	}
	v.Release() // a second call does nothing
}
