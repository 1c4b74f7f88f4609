// Variable validation without gqlparser's per-field cost.
//
// gqlgen's executor validates and coerces every request's variables with
// gqlparser's validator.VariableValues, which walks every field an input
// type defines through reflection, boxing a path element and a
// reflect.Value for each: about 135 of a submitTask's 427 allocations, and
// a fifth of the CPU of a submitTasks of 100 items (ADR 0005, findings 11
// and 12). gqlgen offers no hook to replace it, so run does this instead,
// for a document already in the query cache (parsed and validated):
//
//  1. varCheck.accepts decides, without allocating, whether gqlparser
//     would accept a list or input-object variable *and return it
//     unchanged*. It says no to anything it is not sure of (a value of an
//     unusual Go type, a single value where a list is expected, a float
//     ID), and then nothing changes: gqlparser sees the variable, and its
//     errors are the ones a client gets.
//  2. The variables it accepts reach gqlgen as the smallest values of
//     their types (an empty list; an input object with its required
//     fields at their smallest), which gqlparser validates at once.
//  3. varSwap, the first operation context mutator, puts the real values
//     back before any other extension (limits, the gate, the audit) or
//     resolver sees the operation.
//
// A submitTasks or submitTask input the body decoder read typed
// (decodeParamsTyped, model.DecodeSubmitTasksJSON and DecodeSubmitTaskJSON:
// only what gqlparser would accept and return unchanged) is held back the
// same way, cached query or not.
//
// gqlparser still walked every placeholder: an input object's every
// defined field, boxing a path element and a reflect.Value for each (a
// SubmitTaskInput's 20 fields were about 60 of a submitTask's 300
// allocations; ADR 0005, finding 21). So for a cached operation the
// executor's query cache (varCache) hands gqlgen, for this one request,
// a copy of the document whose operation declares only the variables not
// held back; varSwap puts the real document back with the real values.
// Only when there is no such document (the operation is not cached: a
// submitTasks input read typed whose document left the cache meanwhile)
// do the held variables get placeholders for gqlparser to check.

package server

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/graph/model"
)

// varCheck validates variables as gqlparser does, for the values it is
// sure of.
type varCheck struct {
	cache  graphql.Cache[*ast.QueryDocument]
	schema *ast.Schema
	// fields holds each input object's fields by name (gqlparser's
	// FieldList.ForName is a linear scan).
	fields map[string]map[string]*ast.FieldDefinition

	// stripped holds the documents strip made, by strippedKey.
	stripped   sync.Map
	strippedMu sync.Mutex
	strippedN  int
}

// newVarCheck returns a check over schema that looks operations up in
// cache, the executor's query cache.
func newVarCheck(schema *ast.Schema, cache graphql.Cache[*ast.QueryDocument]) *varCheck {
	c := &varCheck{cache: cache, schema: schema, fields: map[string]map[string]*ast.FieldDefinition{}}
	for name, def := range schema.Types {
		if def.Kind != ast.InputObject {
			continue
		}
		m := make(map[string]*ast.FieldDefinition, len(def.Fields))
		for _, f := range def.Fields {
			m[f.Name] = f
		}
		c.fields[name] = m
	}
	return c
}

// swapped is what run hands varSwap through the context: the variables
// whose real values it holds back from gqlparser, and the documents
// varCache and varSwap trade.
type swapped struct {
	names  []string
	values []any
	types  []*ast.Type
	// Room for the common request's one or two variables.
	namesBuf  [2]string
	valuesBuf [2]any
	typesBuf  [2]*ast.Type

	query    string             // the request's query, the cache's key
	doc      *ast.QueryDocument // the cached document
	stripped *ast.QueryDocument // doc without the held variables' definitions
}

type swapKey struct{}

// prepare holds back from gqlparser the variables the check accepts, and
// returns ctx carrying their values for varSwap and the document without
// their definitions for varCache; only when there is no such document are
// they replaced, in params, by placeholders. It returns ctx and changes
// nothing when the operation is not cached or no variable qualifies.
// typed says that params holds variables read typed
// (*model.SubmitTasksJSON or *model.SubmitTaskJSON, decodeParamsTyped):
// those are always held back, as gqlparser would not know them; the body
// decoder read them only for a variable of that type of this operation,
// and only what gqlparser accepts and returns unchanged.
func (c *varCheck) prepare(ctx context.Context, params *graphql.RawParams, typed bool) context.Context {
	if c == nil || len(params.Variables) == 0 {
		return ctx
	}
	var sw *swapped
	if typed {
		for name, val := range params.Variables {
			switch val.(type) {
			case *model.SubmitTasksJSON:
				sw = c.hold(sw, name, val, submitTasksType)
			case *model.SubmitTaskJSON:
				sw = c.hold(sw, name, val, submitTaskType)
			}
		}
	}
	doc, ok := c.cache.Get(ctx, params.Query)
	var op *ast.OperationDefinition
	if ok {
		if op = doc.Operations.ForName(params.OperationName); op != nil {
			sw = c.prepareOp(op, params, sw)
		}
	}
	if sw == nil {
		return ctx
	}
	if op != nil {
		sw.query, sw.doc, sw.stripped = params.Query, doc, c.strip(doc, op, sw.names)
	}
	if sw.stripped == nil {
		// gqlparser will check the held variables: placeholders for them,
		// in a copy (the caller's map stays as it was decoded).
		vars := make(map[string]any, len(params.Variables))
		for k, v := range params.Variables {
			vars[k] = v
		}
		for i, name := range sw.names {
			vars[name] = c.placeholder(sw.types[i])
		}
		params.Variables = vars
	}
	return context.WithValue(ctx, swapKey{}, sw)
}

// strippedKey names a document without some of an operation's variable
// definitions: the operation and a bit for each definition left out.
type strippedKey struct {
	op   *ast.OperationDefinition
	held uint64
}

// maxStripped bounds the stripped documents kept; beyond it they are
// dropped all at once and made again as requests come.
const maxStripped = 4096

// strip returns a copy of doc whose operation op does not declare the
// variables names, or nil when there is none to leave out. A copy is made
// once per operation and set of names: nothing writes into a document
// once it is cached.
func (c *varCheck) strip(doc *ast.QueryDocument, op *ast.OperationDefinition, names []string) *ast.QueryDocument {
	var held uint64
	for i, def := range op.VariableDefinitions {
		if slices.Contains(names, def.Variable) {
			if i >= 64 {
				return nil
			}
			held |= 1 << i
		}
	}
	if held == 0 {
		return nil
	}
	key := strippedKey{op, held}
	if d, ok := c.stripped.Load(key); ok {
		return d.(*ast.QueryDocument)
	}
	o := *op
	o.VariableDefinitions = make(ast.VariableDefinitionList, 0, len(op.VariableDefinitions))
	for i, def := range op.VariableDefinitions {
		if held&(1<<i) == 0 {
			o.VariableDefinitions = append(o.VariableDefinitions, def)
		}
	}
	d := *doc
	d.Operations = slices.Clone(doc.Operations)
	for i, x := range d.Operations {
		if x == op {
			d.Operations[i] = &o
		}
	}
	c.strippedMu.Lock()
	if c.strippedN >= maxStripped {
		c.stripped.Clear()
		c.strippedN = 0
	}
	if _, loaded := c.stripped.LoadOrStore(key, &d); !loaded {
		c.strippedN++
	}
	c.strippedMu.Unlock()
	return &d
}

// varCache is the executor's query cache: the cache itself, except that a
// request whose variables prepare held back gets its document without
// their definitions (strip), so that gqlparser does not walk their
// placeholders. varSwap puts the cached document back.
type varCache struct {
	graphql.Cache[*ast.QueryDocument]
}

func (c varCache) Get(ctx context.Context, query string) (*ast.QueryDocument, bool) {
	if sw, _ := ctx.Value(swapKey{}).(*swapped); sw != nil && sw.stripped != nil && sw.query == query {
		return sw.stripped, true
	}
	return c.Cache.Get(ctx, query)
}

// The types of the variables read typed.
var (
	submitTasksType = &ast.Type{NamedType: submitTasksInput, NonNull: true}
	submitTaskType  = &ast.Type{NamedType: submitTaskInput, NonNull: true}
)

// prepareOp holds back the variables of op the check accepts.
func (c *varCheck) prepareOp(op *ast.OperationDefinition, params *graphql.RawParams, sw *swapped) *swapped {
	for _, def := range op.VariableDefinitions {
		if def.Type.Elem == nil {
			if t := c.schema.Types[def.Type.NamedType]; t == nil || t.Kind != ast.InputObject {
				continue // scalars and enums: cheap, and gqlparser coerces them
			}
		}
		if sw != nil && slices.Contains(sw.names, def.Variable) {
			continue // read typed, and held back already
		}
		val, present := params.Variables[def.Variable]
		if !present || val == nil || !c.accepts(def.Type, val) {
			continue
		}
		sw = c.hold(sw, def.Variable, val, def.Type)
	}
	return sw
}

// hold notes that the variable name, of type typ, is held back from
// gqlparser with its value val, in sw (made when nil).
func (c *varCheck) hold(sw *swapped, name string, val any, typ *ast.Type) *swapped {
	if sw == nil {
		sw = &swapped{}
		sw.names, sw.values, sw.types = sw.namesBuf[:0], sw.valuesBuf[:0], sw.typesBuf[:0]
	}
	sw.names = append(sw.names, name)
	sw.values = append(sw.values, val)
	sw.types = append(sw.types, typ)
	return sw
}

// accepts reports whether gqlparser's validator.VariableValues accepts v as
// a value of typ and returns it unchanged. False means "not sure" as well
// as "invalid".
func (c *varCheck) accepts(typ *ast.Type, v any) bool {
	if v == nil {
		return !typ.NonNull
	}
	if typ.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			return false // gqlparser wraps a single value in a list: a change
		}
		for _, e := range list {
			if !c.accepts(typ.Elem, e) {
				return false
			}
		}
		return true
	}
	def := c.schema.Types[typ.NamedType]
	if def == nil {
		return false
	}
	switch def.Kind {
	case ast.Enum:
		s, ok := v.(string)
		if !ok {
			return false
		}
		for _, ev := range def.EnumValues {
			if strings.EqualFold(s, ev.Name) {
				return true
			}
		}
		return false
	case ast.Scalar:
		return acceptsScalar(typ.NamedType, v)
	case ast.InputObject:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		fields := c.fields[def.Name]
		for name := range m {
			if _, known := fields[name]; !known && name != "__typename" {
				return false
			}
		}
		for _, f := range def.Fields {
			fv, present := m[f.Name]
			if !present {
				if f.Type.NonNull {
					if f.DefaultValue == nil {
						return false
					}
					if _, err := f.DefaultValue.Value(nil); err != nil {
						return false
					}
				}
				continue
			}
			if fv == nil {
				if f.Type.NonNull {
					return false
				}
				continue
			}
			if !c.accepts(f.Type, fv) {
				return false
			}
		}
		return true
	}
	return false
}

// acceptsScalar is gqlparser's check of a scalar inside a variable, for
// the Go types a JSON decoder gives (json.Number is a string to it).
func acceptsScalar(name string, v any) bool {
	switch name {
	case "Int":
		switch x := v.(type) {
		case int, int32, int64:
			return true
		case float64:
			return !math.IsInf(x, 0) && x == math.Trunc(x)
		case string:
			_, err := strconv.ParseInt(x, 10, 64)
			return err == nil
		case json.Number:
			_, err := strconv.ParseInt(string(x), 10, 64)
			return err == nil
		}
	case "Float":
		switch x := v.(type) {
		case float32, float64, int, int32, int64:
			return true
		case string:
			_, err := strconv.ParseFloat(x, 64)
			return err == nil
		case json.Number:
			_, err := strconv.ParseFloat(string(x), 64)
			return err == nil
		}
	case "String":
		switch v.(type) {
		case string, json.Number:
			return true
		}
	case "Boolean":
		_, ok := v.(bool)
		return ok
	case "ID":
		switch v.(type) {
		case string, json.Number, int, int32, int64:
			return true
		}
		// A float ID is coerced to an integer by gqlparser: a change.
	default:
		return true // gqlparser takes custom scalars as they are
	}
	return false
}

// placeholder is the smallest value of typ gqlparser accepts: a fresh one
// each time, as gqlparser writes into the maps it validates.
func (c *varCheck) placeholder(typ *ast.Type) any {
	if !typ.NonNull {
		return nil
	}
	if typ.Elem != nil {
		return []any{}
	}
	def := c.schema.Types[typ.NamedType]
	switch def.Kind {
	case ast.Enum:
		return def.EnumValues[0].Name
	case ast.InputObject:
		m := map[string]any{}
		for _, f := range def.Fields {
			if f.Type.NonNull && f.DefaultValue == nil {
				m[f.Name] = c.placeholder(f.Type)
			}
		}
		return m
	}
	switch typ.NamedType {
	case "Int":
		return int64(0)
	case "Float":
		return float64(0)
	case "Boolean":
		return false
	}
	return "" // String, ID and custom scalars
}

// varSwap puts back the variables run held back from gqlparser. It must be
// the first operation context mutator the executor runs.
type varSwap struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = varSwap{}

func (varSwap) ExtensionName() string                   { return "SwitchyardVariables" }
func (varSwap) Validate(graphql.ExecutableSchema) error { return nil }

func (varSwap) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	sw, _ := ctx.Value(swapKey{}).(*swapped)
	if sw == nil {
		return nil
	}
	if sw.stripped != nil && oc.Doc == sw.stripped {
		// The document varCache gave for gqlparser's check: the rest of
		// the request sees the cached one.
		oc.Doc = sw.doc
		oc.Operation = sw.doc.Operations.ForName(oc.OperationName)
	}
	for i, name := range sw.names {
		oc.Variables[name] = sw.values[i]
	}
	return nil
}
