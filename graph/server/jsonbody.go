// Decoding a POST body without encoding/json's reflection, for the common
// body.
//
// encoding/json decoded a request body into graphql.RawParams in two passes
// (a scan, then the values), allocating every key of every object, every
// string and number twice (its bytes and its interface box), and growing
// every list by doubling: a fifth of a submitTasks' allocations (ADR 0005,
// findings 12 and 13). decodeParams reads the body in one pass: keys that
// the schema's input objects define are shared strings, lists are
// allocated at their size, and numbers from 0 to 255 are shared boxes.
//
// It takes only what it is sure to read as encoding/json does (a body that
// is one object with at most the four parameters, each once and spelt
// exactly; strings without escapes, else decoded by encoding/json itself;
// numbers of JSON's grammar, as json.Number), and gives the same values.
// Anything else — a syntax error, a misspelt or repeated parameter, a null
// — goes to encoding/json as before, so that its errors (and the 400 a
// client gets for them) do not change. FuzzDecodeParams holds the two to
// the same result.
//
// decodeParamsTyped also reads a submitTasks input straight into its Go
// types when it can (model.DecodeSubmitTasksJSON; ADR 0005, finding 17),
// and a submitTask input (model.DecodeSubmitTaskJSON; finding 21).

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/jsonnum"
)

// The input types read typed (model.DecodeSubmitTasksJSON,
// model.DecodeSubmitTaskJSON).
const (
	submitTasksInput = "SubmitTasksInput"
	submitTaskInput  = "SubmitTaskInput"
)

// maxFastDepth is the deepest nesting the fast path reads; deeper bodies go
// to encoding/json (which refuses beyond 10000).
const maxFastDepth = 256

// smallNumbers holds json.Number boxes for 0..255: a box is immutable, so
// every request may share them.
var smallNumbers = func() (out [256]any) {
	for i := range out {
		out[i] = json.Number(strconv.Itoa(i))
	}
	return out
}()

// bodyKeys are strings to share for object keys: the field names of a
// schema's input objects.
type bodyKeys map[string]string

// newBodyKeys returns the field names of schema's input objects.
func newBodyKeys(schema *ast.Schema) bodyKeys {
	keys := bodyKeys{}
	for _, def := range schema.Types {
		if def.Kind != ast.InputObject {
			continue
		}
		for _, f := range def.Fields {
			keys[f.Name] = f.Name
		}
	}
	return keys
}

// decodeParams decodes a POST body into params as a json.Decoder with
// UseNumber and DisallowUnknownFields does, returning its error.
func decodeParams(body []byte, keys bodyKeys, params *graphql.RawParams) error {
	_, err := decodeParamsTyped(context.Background(), body, keys, nil, params)
	return err
}

// decodeParamsTyped is decodeParams that, when vars is not nil, reads a
// variable of type SubmitTasksInput! (or SubmitTaskInput!) of a cached
// operation (the query given before the variables) straight into a
// *model.SubmitTasksJSON (*model.SubmitTaskJSON) when
// model.DecodeSubmitTasksJSON (DecodeSubmitTaskJSON) is sure of it; typed reports whether it did
// (varCheck.prepare then hands those values past gqlparser). Whatever it
// is not sure of is read as decodeParams reads it.
func decodeParamsTyped(ctx context.Context, body []byte, keys bodyKeys, vars *varCheck, params *graphql.RawParams) (typed bool, err error) {
	p := bodyParser{b: body, keys: keys, vars: vars, ctx: ctx}
	if p.params(params) {
		return p.typedSeen != 0, nil
	}
	*params = graphql.RawParams{}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	return false, dec.Decode(params)
}

// bodyParser reads a JSON document; its methods return false for anything
// they do not take.
type bodyParser struct {
	b     []byte
	i     int
	depth int
	keys  bodyKeys
	stack []any // list items being read, shared by nested lists

	// The typed reading of task inputs (decodeParamsTyped): the
	// operation the variables were read for, the names of its variables
	// of type SubmitTasksInput! or SubmitTaskInput! (typedOne: which are
	// the latter), and which of them were read typed.
	vars       *varCheck
	ctx        context.Context
	typedDoc   *ast.QueryDocument
	typedOp    *ast.OperationDefinition
	typedNames []string
	typedOne   uint64
	typedSeen  uint64
	inVars     bool // reading the variables object
}

func (p *bodyParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte (0 at the end).
func (p *bodyParser) next() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// params reads the body's object into out. Like json.Decoder.Decode, it
// reads nothing after the object.
func (p *bodyParser) params(out *graphql.RawParams) bool {
	if p.next() != '{' {
		return false
	}
	p.i++
	if p.next() == '}' {
		p.i++
		return true
	}
	var seen [4]bool
	for {
		if p.next() != '"' {
			return false
		}
		name, ok := p.rawKey()
		if !ok {
			return false
		}
		var field int
		switch string(name) {
		case "query":
			field = 0
		case "operationName":
			field = 1
		case "variables":
			field = 2
		case "extensions":
			field = 3
		default:
			return false // unknown, or a spelling encoding/json matches without case
		}
		if seen[field] {
			return false // encoding/json merges a repeated object: leave it that
		}
		seen[field] = true
		if p.next() != ':' {
			return false
		}
		p.i++
		switch field {
		case 0, 1:
			if p.next() != '"' {
				return false
			}
			s, ok := p.str()
			if !ok {
				return false
			}
			if field == 0 {
				out.Query = s
			} else {
				out.OperationName = s
			}
		case 2, 3:
			if p.next() != '{' {
				return false
			}
			if field == 2 && seen[0] {
				p.typedFor(out.Query, out.OperationName)
			}
			p.inVars = field == 2
			m, ok := p.object()
			p.inVars = false
			if !ok {
				return false
			}
			if field == 2 {
				out.Variables = m
			} else {
				out.Extensions = m
			}
		}
		switch p.next() {
		case ',':
			p.i++
		case '}':
			p.i++
			// The variables read typed were for this operation: the
			// operationName given after them names it too.
			return p.typedSeen == 0 || p.typedDoc.Operations.ForName(out.OperationName) == p.typedOp
		default:
			return false
		}
	}
}

// typedFor notes the variables of type SubmitTasksInput! or
// SubmitTaskInput! of the operation opName of query, if it is cached, for
// object to read typed.
func (p *bodyParser) typedFor(query, opName string) {
	if p.vars == nil {
		return
	}
	doc, ok := p.vars.cache.Get(p.ctx, query)
	if !ok {
		return
	}
	op := doc.Operations.ForName(opName)
	if op == nil {
		return
	}
	for _, def := range op.VariableDefinitions {
		if t := def.Type; t.NonNull && t.Elem == nil && (t.NamedType == submitTasksInput || t.NamedType == submitTaskInput) && len(p.typedNames) < 64 {
			if t.NamedType == submitTaskInput {
				p.typedOne |= 1 << len(p.typedNames)
			}
			p.typedNames = append(p.typedNames, def.Variable)
		}
	}
	if len(p.typedNames) > 0 {
		p.typedDoc, p.typedOp = doc, op
	}
}

// typedValue reads the value of the variable k typed, if k is one of
// typedNames and model.DecodeSubmitTasksJSON (DecodeSubmitTaskJSON for a
// SubmitTaskInput!) is sure of it; ok false with
// done true means k was read typed before (the generic path merges a
// repeated variable: leave it that).
func (p *bodyParser) typedValue(k string) (v any, done, ok bool) {
	for n, name := range p.typedNames {
		if name != k {
			continue
		}
		if p.typedSeen&(1<<n) != 0 {
			return nil, true, false
		}
		p.ws()
		var end int
		if p.typedOne&(1<<n) != 0 {
			v, end, ok = model.DecodeSubmitTaskJSON(p.b[p.i:])
		} else {
			v, end, ok = model.DecodeSubmitTasksJSON(p.b[p.i:])
		}
		if !ok {
			return nil, false, false
		}
		p.i += end
		p.typedSeen |= 1 << n
		return v, true, true
	}
	return nil, false, false
}

// rawKey reads a key without escapes, as the bytes of the body.
func (p *bodyParser) rawKey() ([]byte, bool) {
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

func (p *bodyParser) value() (any, bool) {
	switch c := p.next(); {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, ok := p.str()
		return s, ok
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, false
}

func (p *bodyParser) literal(word string) bool {
	if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		return false
	}
	p.i += len(word)
	return true
}

// object reads an object into a map; a repeated key keeps its last value,
// as with encoding/json.
func (p *bodyParser) object() (map[string]any, bool) {
	if p.depth++; p.depth > maxFastDepth {
		return nil, false
	}
	p.i++ // {
	m := map[string]any{}
	if p.next() == '}' {
		p.i++
		p.depth--
		return m, true
	}
	for {
		if p.next() != '"' {
			return nil, false
		}
		k, ok := p.key()
		if !ok {
			return nil, false
		}
		if p.next() != ':' {
			return nil, false
		}
		p.i++
		var v any
		if p.inVars && p.depth == 1 && p.typedNames != nil {
			// The variables object.
			var done bool
			if v, done, ok = p.typedValue(k); done && !ok {
				return nil, false
			}
			if !done {
				v, ok = p.value()
			}
		} else {
			v, ok = p.value()
		}
		if !ok {
			return nil, false
		}
		m[k] = v
		switch p.next() {
		case ',':
			p.i++
		case '}':
			p.i++
			p.depth--
			return m, true
		default:
			return nil, false
		}
	}
}

// array reads a list, allocated at its length (encoding/json grows it).
func (p *bodyParser) array() ([]any, bool) {
	if p.depth++; p.depth > maxFastDepth {
		return nil, false
	}
	p.i++ // [
	if p.stack == nil {
		p.stack = make([]any, 0, 128)
	}
	base := len(p.stack)
	if p.next() != ']' {
		for {
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			p.stack = append(p.stack, v)
			if c := p.next(); c == ',' {
				p.i++
				continue
			} else if c != ']' {
				return nil, false
			}
			break
		}
	}
	p.i++ // ]
	p.depth--
	list := make([]any, len(p.stack)-base)
	copy(list, p.stack[base:])
	clear(p.stack[base:])
	p.stack = p.stack[:base]
	return list, true
}

// key reads an object's key, sharing the schema's field names.
func (p *bodyParser) key() (string, bool) {
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		if c == '"' {
			if k, ok := p.keys[string(p.b[start:j])]; ok {
				p.i = j + 1
				return k, true
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	return p.str()
}

// str reads a string. One without escapes or control characters whose
// bytes are UTF-8 is what encoding/json makes of it; any other goes
// through encoding/json.
func (p *bodyParser) str() (string, bool) {
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(p.b[start:j]) {
				return p.slowStr(j)
			}
			p.i = j + 1
			return string(p.b[start:j]), true
		case c == '\\' || c < 0x20:
			return p.slowStr(j)
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// slowStr reads the string at p.i with encoding/json, from j (inside it)
// looking for its end.
func (p *bodyParser) slowStr(j int) (string, bool) {
	for j < len(p.b) {
		switch p.b[j] {
		case '\\':
			j += 2
			continue
		case '"':
			s, ok := unescapeSimple(p.b[p.i+1 : j])
			if !ok {
				if err := json.Unmarshal(p.b[p.i:j+1], &s); err != nil {
					return "", false
				}
			}
			p.i = j + 1
			return s, true
		}
		j++
	}
	return "", false
}

// unescapeSimple decodes a string's contents (between its quotes) whose
// escapes are all of one character (\n, \t, \", …: a query's line breaks
// and indents), as encoding/json would; ok false for anything else (a \u
// escape, a control character, bytes that are not UTF-8), which
// encoding/json then decodes, or refuses.
func unescapeSimple(b []byte) (string, bool) {
	if !utf8.Valid(b) {
		return "", false
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			continue
		}
		if i++; i == len(b) {
			return "", false
		}
		switch b[i] {
		case '"', '\\', '/':
			out = append(out, b[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return "", false
		}
	}
	return string(out), true
}

// number reads a number of JSON's grammar as a json.Number.
func (p *bodyParser) number() (any, bool) {
	start := p.i
	j, ok := jsonnum.End(p.b, start)
	if !ok {
		return nil, false
	}
	p.i = j
	lit := p.b[start:j]
	if len(lit) <= 3 && lit[0] != '-' {
		n := 0
		for _, c := range lit {
			if c < '0' || c > '9' {
				n = -1
				break
			}
			n = n*10 + int(c-'0')
		}
		if n >= 0 && n < len(smallNumbers) {
			return smallNumbers[n], true
		}
	}
	return json.Number(lit), true
}
