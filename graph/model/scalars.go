// Custom scalars and the enum values that the engine does not define: the
// JSON scalar, LAGGED events and the error codes of the API layer.

package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/99designs/gqlgen/graphql"

	"github.com/switchyard/switchyard/engine"
)

// EventLagged is the TaskEventKind of a LAGGED notice: not an engine event,
// but the subscription telling its client how many events it missed.
const EventLagged engine.EventType = 200

// Error codes of the API layer, beyond the engine's.
const (
	CodePluginInvalid   engine.Code = "PLUGIN_INVALID"
	CodeUnauthenticated engine.Code = "UNAUTHENTICATED"
	CodeForbidden       engine.Code = "FORBIDDEN"
	CodeRateLimited     engine.Code = "RATE_LIMITED"
	CodeInternal        engine.Code = "INTERNAL"
	CodeLeaseLost       engine.Code = "LEASE_LOST" // the code of pull.LostError
)

// MarshalJSON writes a raw JSON value as the JSON scalar (null when empty).
func MarshalJSON(v json.RawMessage) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 {
			_, _ = io.WriteString(w, "null")
			return
		}
		_, _ = w.Write(v)
	})
}

// UnmarshalJSON reads the JSON scalar: any value, from a variable (already
// decoded) or an inline literal, re-encoded compactly.
func UnmarshalJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if b, ok := appendPlainJSON(nil, v); ok {
		return b, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes())), nil
}

// appendPlainJSON appends v to b as UnmarshalJSON's encoder writes it (map
// keys sorted, nothing escaped for HTML), without reflection, for the
// values a JSON decoder gives (maps, lists, strings, json.Number, booleans,
// null) whose strings are printable ASCII without quotes or backslashes:
// what a task's action parameters usually are. ok is false for anything
// else, and the encoder takes it (ADR 0005, finding 12).
func appendPlainJSON(b []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendPlainString(b, x)
	case json.Number:
		if !isJSONNumber(string(x)) {
			return b, false
		}
		return append(b, x...), true
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendPlainJSON(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		var keys [16]string
		sorted := keys[:0]
		for k := range x {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		b = append(b, '{')
		for i, k := range sorted {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendPlainString(b, k); !ok {
				return b, false
			}
			b = append(b, ':')
			if b, ok = appendPlainJSON(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendPlainString appends s quoted if no character of it needs escaping.
func appendPlainString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// isJSONNumber reports whether s is a number in JSON's grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), as encoding/json
// requires of a json.Number.
func isJSONNumber(s string) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
