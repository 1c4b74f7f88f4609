// Package schema is the subset of JSON Schema by which a Switchyard plugin
// declares what its configuration may hold, and the validator the host
// runs before the plugin sees a configuration (plugins/ABI.md,
// "Configuration schema").
//
// The subset: type (one of "object", "array", "string", "number",
// "integer", "boolean"), properties, required, additionalProperties (a
// boolean), minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers),
// minLength, maxLength, enum, items, minItems, maxItems, and the
// annotations title, description, default and $schema, which are not
// checked. Any other keyword is refused, so that a schema never promises a
// check the host does not make.
//
// Errors name the field, from the root called "config":
//
//	config.maxShare: must be ≤ 1
//	config.lanes[2]: must be a string, not a number
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Schema is one node of a configuration schema. Its JSON encoding is the
// JSON Schema text the module declares.
type Schema struct {
	Type                 string             `json:"type,omitempty"`
	Title                string             `json:"title,omitempty"`
	Description          string             `json:"description,omitempty"`
	Default              any                `json:"default,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	ExclusiveMinimum     *float64           `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum     *float64           `json:"exclusiveMaximum,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	MinItems             *int               `json:"minItems,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
}

// Ptr returns a pointer to v: for the optional bounds of a Schema literal.
func Ptr[T any](v T) *T { return &v }

// Error is a configuration that does not satisfy its schema, or a schema
// that is not valid. Path names the field ("config.maxShare",
// "config.lanes[2]"; "schema.properties.x" for a schema's own fault).
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// known are the keywords a schema may use.
var known = map[string]bool{
	"$schema": true, "type": true, "title": true, "description": true, "default": true,
	"properties": true, "required": true, "additionalProperties": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "enum": true, "items": true, "minItems": true, "maxItems": true,
}

var types = []string{"object", "array", "string", "number", "integer", "boolean"}

// Parse reads a schema's JSON text and checks that it uses only the subset.
func Parse(text []byte) (*Schema, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, &Error{Path: "schema", Msg: "not JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &Error{Path: "schema", Msg: "more than one JSON value"}
	}
	if err := checkKeywords(raw, "schema"); err != nil {
		return nil, err
	}
	var s Schema
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, &Error{Path: "schema", Msg: err.Error()}
	}
	if err := s.check("schema"); err != nil {
		return nil, err
	}
	return &s, nil
}

// MustParse is Parse that panics: for a schema written in a plugin's code.
func MustParse(text string) *Schema {
	s, err := Parse([]byte(text))
	if err != nil {
		panic(err)
	}
	return s
}

// JSON returns the schema's JSON text, after checking it.
func (s *Schema) JSON() ([]byte, error) {
	if err := s.check("schema"); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

func checkKeywords(raw any, path string) error {
	m, ok := raw.(map[string]any)
	if !ok {
		return &Error{Path: path, Msg: "must be an object"}
	}
	for k, v := range m {
		if !known[k] {
			return &Error{Path: path, Msg: fmt.Sprintf("keyword %q is not supported (supported: type, properties, required, additionalProperties, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, enum, items, minItems, maxItems)", k)}
		}
		switch k {
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return &Error{Path: path + ".properties", Msg: "must be an object"}
			}
			for name, sub := range props {
				if err := checkKeywords(sub, path+".properties."+name); err != nil {
					return err
				}
			}
		case "items":
			if err := checkKeywords(v, path+".items"); err != nil {
				return err
			}
		case "additionalProperties":
			if _, ok := v.(bool); !ok {
				return &Error{Path: path + ".additionalProperties", Msg: "must be a boolean"}
			}
		}
	}
	return nil
}

// check verifies a schema's own consistency.
func (s *Schema) check(path string) error {
	if s.Type != "" && !slices.Contains(types, s.Type) {
		return &Error{Path: path + ".type", Msg: fmt.Sprintf("%q is not one of %s", s.Type, strings.Join(types, ", "))}
	}
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; !ok && s.AdditionalProperties != nil && !*s.AdditionalProperties {
			return &Error{Path: path + ".required", Msg: fmt.Sprintf("%q is required but not among the properties", r)}
		}
	}
	for name, sub := range s.Properties {
		if sub == nil {
			return &Error{Path: path + ".properties." + name, Msg: "must be an object"}
		}
		if err := sub.check(path + ".properties." + name); err != nil {
			return err
		}
	}
	if s.Items != nil {
		if err := s.Items.check(path + ".items"); err != nil {
			return err
		}
	}
	if s.Minimum != nil && s.Maximum != nil && *s.Minimum > *s.Maximum {
		return &Error{Path: path, Msg: "minimum is above maximum"}
	}
	for _, p := range []*int{s.MinLength, s.MaxLength, s.MinItems, s.MaxItems} {
		if p != nil && *p < 0 {
			return &Error{Path: path, Msg: "a length bound is negative"}
		}
	}
	return nil
}

// Validate checks a configuration document against s. An empty document
// (no configuration: the plugin keeps its defaults) is valid.
func (s *Schema) Validate(doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return &Error{Path: "config", Msg: "not JSON: " + err.Error()}
	}
	if dec.More() {
		return &Error{Path: "config", Msg: "more than one JSON value"}
	}
	return s.validate(v, "config")
}

// kind names a decoded JSON value's type.
func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isInteger(v) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func isInteger(n json.Number) bool {
	if _, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return true
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

func (s *Schema) validate(v any, path string) error {
	k := kind(v)
	if s.Type != "" {
		ok := k == s.Type || (s.Type == "number" && k == "integer")
		if !ok {
			return &Error{Path: path, Msg: fmt.Sprintf("must be %s, not %s", article(s.Type), article(k))}
		}
	}
	if len(s.Enum) > 0 {
		found := false
		for _, e := range s.Enum {
			if equal(e, v) {
				found = true
				break
			}
		}
		if !found {
			opts := make([]string, len(s.Enum))
			for i, e := range s.Enum {
				b, _ := json.Marshal(e)
				opts[i] = string(b)
			}
			return &Error{Path: path, Msg: "must be one of " + strings.Join(opts, ", ")}
		}
	}
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return &Error{Path: path, Msg: "number out of range"}
		}
		switch {
		case s.Minimum != nil && f < *s.Minimum:
			return &Error{Path: path, Msg: "must be ≥ " + num(*s.Minimum)}
		case s.Maximum != nil && f > *s.Maximum:
			return &Error{Path: path, Msg: "must be ≤ " + num(*s.Maximum)}
		case s.ExclusiveMinimum != nil && f <= *s.ExclusiveMinimum:
			return &Error{Path: path, Msg: "must be > " + num(*s.ExclusiveMinimum)}
		case s.ExclusiveMaximum != nil && f >= *s.ExclusiveMaximum:
			return &Error{Path: path, Msg: "must be < " + num(*s.ExclusiveMaximum)}
		}
	case string:
		n := utf8.RuneCountInString(v)
		switch {
		case s.MinLength != nil && n < *s.MinLength:
			return &Error{Path: path, Msg: "must be at least " + count(*s.MinLength, "character") + " long"}
		case s.MaxLength != nil && n > *s.MaxLength:
			return &Error{Path: path, Msg: "must be at most " + count(*s.MaxLength, "character") + " long"}
		}
	case []any:
		switch {
		case s.MinItems != nil && len(v) < *s.MinItems:
			return &Error{Path: path, Msg: "must have at least " + count(*s.MinItems, "item")}
		case s.MaxItems != nil && len(v) > *s.MaxItems:
			return &Error{Path: path, Msg: "must have at most " + count(*s.MaxItems, "item")}
		}
		if s.Items != nil {
			for i, e := range v {
				if err := s.Items.validate(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := v[r]; !ok {
				return &Error{Path: path + "." + r, Msg: "is required"}
			}
		}
		names := make([]string, 0, len(v))
		for name := range v {
			names = append(names, name)
		}
		slices.Sort(names) // the first fault in a stable order
		for _, name := range names {
			sub, ok := s.Properties[name]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return &Error{Path: path + "." + name, Msg: "unknown field"}
				}
				continue
			}
			if err := sub.validate(v[name], path+"."+name); err != nil {
				return err
			}
		}
	}
	return nil
}

// article returns a JSON type's name with its article.
func article(k string) string {
	switch k {
	case "null":
		return "null"
	case "integer", "array", "object":
		return "an " + k
	}
	return "a " + k
}

// num formats a bound as JSON would.
func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// equal compares an enum's value with a decoded one: numbers by value.
func equal(e, v any) bool {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		if err != nil {
			return false
		}
		switch e := e.(type) {
		case float64:
			return e == f
		case json.Number:
			g, err := e.Float64()
			return err == nil && g == f
		case int:
			return float64(e) == f
		}
		return false
	}
	switch e := e.(type) {
	case nil, bool, string:
		return e == v
	}
	eb, err1 := json.Marshal(e)
	vb, err2 := json.Marshal(v)
	return err1 == nil && err2 == nil && bytes.Equal(eb, vb)
}

// IsError reports whether err is, or wraps, a schema Error.
func IsError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// count is n noun, plural unless n is 1: "1 character", "2 characters".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
