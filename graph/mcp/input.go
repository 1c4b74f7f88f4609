// Tool arguments: each tool's arguments are checked against its input
// schema here, before its handler, so that a call that does not fit is a
// tool error with the structured INVALID_INPUT every other refusal carries
// (the SDK's own check answers with text only).

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/graph/internal/jsonutf8"
)

// toolHandler is a tool's handler, given its decoded arguments; its Out is
// the result's structured content.
type toolHandler[In, Out any] func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error)

// addTool registers a tool whose arguments are In. Its input schema is the
// tool's own, or In's; arguments that do not fit it are refused with
// INVALID_INPUT naming the argument at fault, before the handler runs (so
// nothing is submitted). fail answers an error (failure, for the tools
// whose structured content is an Output).
func addTool[In, Out any](srv *sdk.Server, t *sdk.Tool, h toolHandler[In, Out], fail toolHandlerErr[Out]) error {
	return addAuditedTool(srv, t, h, fail, nil)
}

// addAuditedTool is addTool for a tool that submits or cancels: refused
// (when not nil) audits a call whose arguments do not fit the schema, as
// the handler audits its own refusals (Server.refusedCall).
func addAuditedTool[In, Out any](srv *sdk.Server, t *sdk.Tool, h toolHandler[In, Out], fail toolHandlerErr[Out], refused func(*sdk.CallToolRequest, error)) error {
	schema, _ := t.InputSchema.(*jsonschema.Schema)
	if schema == nil {
		s, err := jsonschema.For[In](nil)
		if err != nil {
			return fmt.Errorf("mcp: %s input schema: %w", t.Name, err)
		}
		schema = s
		t.InputSchema = s
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return fmt.Errorf("mcp: %s input schema: %w", t.Name, err)
	}
	srv.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ctx = withCallRequest(ctx, req.Extra)
		var in In
		if err := checkArgs(schema, resolved, req.Params.Arguments, &in); err != nil {
			if refused != nil {
				refused(req, err)
			}
			res, out, _ := fail(ctx, err)
			res.StructuredContent = out
			return res, nil
		}
		res, out, err := h(ctx, req, in)
		if err != nil || res == nil {
			res, out, _ = fail(ctx, err)
		}
		res.StructuredContent = out
		return res, nil
	})
	return nil
}

// toolHandlerErr answers a call that failed.
type toolHandlerErr[Out any] func(ctx context.Context, err error) (*sdk.CallToolResult, Out, error)

// checkArgs validates raw arguments against a tool's schema and decodes
// them into in. Its error is INVALID_INPUT naming the argument at fault.
func checkArgs(schema *jsonschema.Schema, resolved *jsonschema.Resolved, raw json.RawMessage, in any) error {
	// Before decoding: encoding/json turns bytes that are not UTF-8, and
	// lone surrogate escapes ("\ud800"), into U+FFFD without a word.
	// graph/server leaves the arguments' strings to this check.
	if field, ok := jsonutf8.Check(raw); !ok {
		if field == "body" {
			field = ""
		}
		return invalid(field, "not valid UTF-8 (strings must be UTF-8; invalid bytes and lone surrogates are refused, not replaced)")
	}
	args := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := json.Unmarshal(raw, &args); err != nil {
			return invalid("", "the arguments are not a JSON object: %v", err)
		}
	}
	if err := resolved.Validate(args); err != nil {
		return invalid(fieldOf(schema, args, ""), "%s", schemaMessage(err))
	}
	// Remarshalled from the checked map: raw may be "null" or empty.
	b, err := json.Marshal(args)
	if err != nil {
		return invalid("", "the arguments: %v", err)
	}
	if err := json.Unmarshal(b, in); err != nil {
		return invalid("", "the arguments: %v", err)
	}
	return nil
}

// fieldOf finds the argument at fault in args, which do not fit schema: an
// argument the schema does not know, a required one missing, or one whose
// value does not fit its property's schema (within objects, its own field,
// "action.kind"). "" when none can be named.
func fieldOf(schema *jsonschema.Schema, args map[string]any, prefix string) string {
	keys := slices.Sorted(maps.Keys(args))
	for _, k := range keys {
		ap := schema.AdditionalProperties
		if _, ok := schema.Properties[k]; !ok && ap != nil && ap.Not != nil {
			return prefix + k
		}
	}
	for _, r := range schema.Required {
		if _, ok := args[r]; !ok {
			return prefix + r
		}
	}
	for _, k := range keys {
		p := schema.Properties[k]
		if p == nil {
			continue
		}
		r, err := p.Resolve(nil)
		if err != nil || r.Validate(args[k]) == nil {
			continue
		}
		if obj, ok := args[k].(map[string]any); ok {
			if f := fieldOf(p, obj, prefix+k+"."); f != "" {
				return f
			}
		}
		return prefix + k
	}
	return ""
}

// schemaMessage shortens a validation error to its last clause: the
// validator wraps it in "validating <schema path>: " once per level.
func schemaMessage(err error) string {
	msg := err.Error()
	for {
		i := strings.Index(msg, "validating ")
		if i != 0 {
			break
		}
		j := strings.Index(msg, ": ")
		if j < 0 {
			break
		}
		msg = msg[j+2:]
	}
	return "does not fit the tool's input schema: " + msg
}
