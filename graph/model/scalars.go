// Custom scalars and the enum values that the engine does not define: the
// JSON scalar, LAGGED events and the error codes of the API layer.

package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes())), nil
}
