// Strings that are not UTF-8. encoding/json decodes invalid bytes, and
// escapes of lone UTF-16 surrogates ("\ud800"), to U+FFFD without a word, so
// "\xff\xfe" and "\xfe\xff" would become the same agent id. The body of a
// request is checked before it is decoded; the place of the first bad string
// is named as a path ("variables.in.agentId", "query").

package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// invalidUTF8InJSON reports whether every string of a JSON document is
// UTF-8, and if not, the path of the first that is not. A document that is
// not JSON passes: the transport reports that.
func invalidUTF8InJSON(doc []byte) (string, bool) {
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
	path := func() string {
		var parts []string
		for _, l := range stack {
			if l.object {
				parts = append(parts, l.key)
			} else {
				parts = append(parts, strconv.Itoa(l.index-1))
			}
		}
		if len(parts) == 0 {
			return "body"
		}
		return strings.Join(parts, ".")
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
				return path(), false
			}
			if top != nil && !top.object {
				top.index++
			}
			return path(), false
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

// invalidUTF8InQuery checks the parameters of a GET request: query and
// operationName as they are, variables and extensions as JSON.
func invalidUTF8InQuery(q url.Values) (string, bool) {
	for name, values := range q {
		for _, v := range values {
			switch name {
			case "variables", "extensions":
				if field, ok := invalidUTF8InJSON([]byte(v)); !ok {
					if field == "body" {
						return name, false
					}
					return name + "." + field, false
				}
			default:
				if !utf8.ValidString(v) {
					return name, false
				}
			}
		}
	}
	return "", true
}
