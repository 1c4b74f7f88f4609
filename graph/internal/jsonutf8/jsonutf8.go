// Package jsonutf8 finds the strings of a JSON document that are not UTF-8.
// encoding/json decodes invalid bytes, and escapes of lone UTF-16
// surrogates ("\ud800"), to U+FFFD without a word, so "\xff\xfe" and
// "\xfe\xff" would become the same agent id. A document is checked before it
// is decoded; the place of the first bad string is named as a path
// ("variables.in.agentId", "params.arguments.text").
package jsonutf8

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Check reports whether every string of a JSON document is UTF-8, and if
// not, the path of the first that is not: its keys and indexes joined with
// dots, "(a key)" for a key that is not UTF-8, "body" for a document that
// is one string. A document that is not JSON passes: its reader reports
// that.
func Check(doc []byte) (string, bool) { return CheckExcept(doc, nil) }

// CheckExcept is Check, but a bad string whose path (its keys and indexes)
// skip accepts is passed over: a handler checks those itself. skip may be
// nil.
func CheckExcept(doc []byte, skip func(path []string) bool) (string, bool) {
	if utf8.Valid(doc) && !hasSurrogateEscape(doc) {
		return "", true
	}
	type level struct {
		object bool
		key    string // the current key, in an object
		index  int    // the next index, in an array
		inKey  bool   // an object's next string is a key
	}
	var stack []*level
	parts := func() []string {
		p := make([]string, 0, len(stack))
		for _, l := range stack {
			if l.object {
				p = append(p, l.key)
			} else {
				p = append(p, strconv.Itoa(l.index-1))
			}
		}
		return p
	}
	bad := func() (string, bool) {
		p := parts()
		if skip != nil && skip(p) {
			return "", true
		}
		if len(p) == 0 {
			return "body", false
		}
		return strings.Join(p, "."), false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return "", true
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.inKey
		if str, ok := tok.(string); ok && !validJSONString(doc[start:dec.InputOffset()], str) {
			if isKey {
				top.key = "(a key)"
				top.inKey = false
				if path, ok := bad(); !ok {
					return path, false
				}
				continue
			}
			if top != nil && !top.object {
				top.index++
			}
			if path, ok := bad(); !ok {
				return path, false
			}
			if top != nil && top.object {
				top.inKey = true
			}
			continue
		}
		switch {
		case tok == json.Delim('}') || tok == json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].inKey = true
			}
			continue
		case isKey:
			top.key, top.inKey = tok.(string), false
			continue
		case top != nil && !top.object:
			top.index++
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, inKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		default:
			if top != nil && top.object {
				top.inKey = true
			}
		}
	}
}

// validJSONString reports whether a string token decoded to what its raw
// bytes say: every U+FFFD in the decoded string is one written in the
// document (as UTF-8 or as \ufffd), not a replacement.
func validJSONString(raw []byte, decoded string) bool {
	if !utf8.Valid(raw) {
		return false
	}
	n := strings.Count(decoded, "\uFFFD")
	if n == 0 {
		return true
	}
	written := bytes.Count(raw, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(raw), []byte(`\ufffd`))
	return n <= written
}

// hasSurrogateEscape reports whether doc may hold a \uD800–\uDFFF escape.
func hasSurrogateEscape(doc []byte) bool {
	for i := 0; ; {
		j := bytes.Index(doc[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i < len(doc) && (doc[i] == 'd' || doc[i] == 'D') {
			return true
		}
	}
}
