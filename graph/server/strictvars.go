// Variables coerced as the GraphQL specification says, not as gqlparser
// does.
//
// gqlparser's variable check is lenient where the specification is not: it
// takes an enum value in any letter case ("low" for LOW), an Int given as
// a string ("1000") and, behind the server's own check (vars.go), a String
// given as a number. gqlgen then maps an enum name it does not know to the
// enum's zero value: a "low" priority became CRITICAL, a "drop_oldest" drop
// policy REJECT, a "succeeded" state filter matched nothing. strictVars
// refuses such a variable before any resolver sees it, with the
// specification's rules for variable values (section "Coercing Variable
// Values" and each type's input coercion):
//
//   - an enum value is a string naming one of the enum's values exactly;
//   - a String is a string, a Boolean a boolean, an Int or a Float a
//     number (an Int without a fractional part), an ID a string or an
//     integer;
//   - input objects and lists are checked field by field and item by
//     item (a single value where a list is expected is a list of one);
//   - custom scalars (Time, JSON, …) are left to their own unmarshallers,
//     which refuse what they cannot read; nulls and missing fields to
//     gqlparser, which has checked them already.
//
// A submitTasks or submitTask input the body decoder read typed
// (model.SubmitTasksJSON, model.SubmitTaskJSON) is exact by construction
// and is not walked again.

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// strictVars is the operation context mutator that checks variables
// against the specification's coercion rules (after varSwap has put the
// held-back values in place).
type strictVars struct {
	schema *ast.Schema // set by Validate
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = (*strictVars)(nil)

func (*strictVars) ExtensionName() string { return "SwitchyardStrictVariables" }

func (s *strictVars) Validate(es graphql.ExecutableSchema) error {
	s.schema = es.Schema()
	return nil
}

func (s *strictVars) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || len(oc.Variables) == 0 {
		return nil
	}
	for _, def := range oc.Operation.VariableDefinitions {
		v, ok := oc.Variables[def.Variable]
		if !ok {
			continue
		}
		if err := s.check(def.Type, v, ast.Path{ast.PathName("variable"), ast.PathName(def.Variable)}); err != nil {
			errcode.Set(err, errcode.ValidationFailed)
			return err
		}
	}
	return nil
}

// check reports the first value within v that typ's input coercion
// refuses, at path.
func (s *strictVars) check(typ *ast.Type, v any, path ast.Path) *gqlerror.Error {
	if v == nil {
		return nil
	}
	if typ.Elem != nil {
		if list, ok := v.([]any); ok {
			for i, e := range list {
				if err := s.check(typ.Elem, e, append(path, ast.PathIndex(i))); err != nil {
					return err
				}
			}
			return nil
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice {
			return s.check(typ.Elem, v, path) // a list of one
		}
		// The list of one gqlparser made of a single value (a []string, …).
		for i := range rv.Len() {
			if err := s.check(typ.Elem, rv.Index(i).Interface(), append(path, ast.PathIndex(i))); err != nil {
				return err
			}
		}
		return nil
	}
	def := s.schema.Types[typ.NamedType]
	if def == nil {
		return nil
	}
	switch def.Kind {
	case ast.Enum:
		return checkEnum(def, v, path)
	case ast.Scalar:
		return checkScalar(def.Name, v, path)
	case ast.InputObject:
		m, ok := v.(map[string]any)
		if !ok {
			return nil // a value read typed, or not an object: gqlparser's
		}
		for name, fv := range m {
			f := def.Fields.ForName(name)
			if f == nil {
				continue // __typename; an unknown field gqlparser refused
			}
			if err := s.check(f.Type, fv, append(path, ast.PathName(name))); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEnum refuses anything but a string that names one of def's values
// exactly, suggesting the value a differently cased name meant.
func checkEnum(def *ast.Definition, v any, path ast.Path) *gqlerror.Error {
	s, ok := v.(string)
	if !ok {
		return gqlerror.ErrorPathf(path, "%s is not a valid %s: an enum value is a string, one of %s", describe(v), def.Name, enumNames(def))
	}
	for _, ev := range def.EnumValues {
		if s == ev.Name {
			return nil
		}
	}
	for _, ev := range def.EnumValues {
		if strings.EqualFold(s, ev.Name) {
			return gqlerror.ErrorPathf(path, "%q is not a valid %s (enum values are case-sensitive): did you mean %s?", s, def.Name, ev.Name)
		}
	}
	return gqlerror.ErrorPathf(path, "%q is not a valid %s: one of %s", s, def.Name, enumNames(def))
}

// checkScalar refuses a built-in scalar of the wrong JSON type.
func checkScalar(name string, v any, path ast.Path) *gqlerror.Error {
	ok := true
	switch name {
	case "String":
		_, ok = v.(string)
	case "Boolean":
		_, ok = v.(bool)
	case "Float":
		_, ok = number(v)
	case "Int":
		f, num := number(v)
		ok = num && f == math.Trunc(f) && !math.IsInf(f, 0)
		if num && !ok {
			return gqlerror.ErrorPathf(path, "%s is not an Int: an Int has no fractional part", describe(v))
		}
	case "ID":
		if _, str := v.(string); !str {
			f, num := number(v)
			ok = num && f == math.Trunc(f) && !math.IsInf(f, 0)
		}
	default:
		return nil // custom scalars unmarshal themselves
	}
	if !ok {
		return gqlerror.ErrorPathf(path, "%s is not a %s: %s", describe(v), name, scalarWants[name])
	}
	return nil
}

// scalarWants says what each built-in scalar takes.
var scalarWants = map[string]string{
	"String":  "a String is a JSON string",
	"Boolean": "a Boolean is true or false",
	"Float":   "a Float is a JSON number",
	"Int":     "an Int is a JSON number without a fractional part",
	"ID":      "an ID is a JSON string or an integer",
}

// number returns v's value when v is a JSON number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// describe names a variable's value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case json.Number:
		return "the number " + string(x)
	case float64, float32, int, int32, int64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return strconv.FormatBool(x)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("a %T", v)
}

// enumNames lists def's values.
func enumNames(def *ast.Definition) string {
	names := make([]string, len(def.EnumValues))
	for i, ev := range def.EnumValues {
		names[i] = ev.Name
	}
	return strings.Join(names, ", ")
}
