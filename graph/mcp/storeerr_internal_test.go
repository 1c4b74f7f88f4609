package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// A tool's or a resource's error caused by the database says what failed in
// general terms, not the database's address; other errors keep their text.
func TestStoreErrorsReachToolsInGeneralTerms(t *testing.T) {
	store := storeerr.Mark(fmt.Errorf("postgres store: postgres://sy@db.internal:5432/prod (schema \"s\"): list tasks: %w", syscall.ECONNREFUSED))
	ee := &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: "listing tasks", Err: store}

	te := toolError(ee)
	require.Equal(t, "UNAVAILABLE", te.Code)
	require.True(t, te.Retryable)
	require.Equal(t, "listing tasks: the database cannot be reached (connection refused)", te.Message)

	te = toolError(fmt.Errorf("reading: %w", store))
	require.Equal(t, "INTERNAL", te.Code)
	require.Equal(t, "reading: the database cannot be reached (connection refused)", te.Message)

	var rpc *jsonrpc.Error
	require.True(t, errors.As(resourceError("switchyard://tasks/x", ee), &rpc))
	require.Equal(t, "listing tasks: the database cannot be reached (connection refused)", rpc.Message)

	// The full error goes to the server's log, which names the call's
	// request, as the answer does.
	var buf bytes.Buffer
	srv := &Server{log: hclog.New(&hclog.LoggerOptions{Output: &buf})}
	res, out, _ := srv.failure(requestid.WithID(context.Background(), "call-1"), ee)
	require.True(t, res.IsError)
	require.Contains(t, buf.String(), "postgres://sy@db.internal:5432/prod")
	require.Contains(t, buf.String(), "answered=mcp")
	require.Contains(t, buf.String(), "request_id=call-1")
	require.Equal(t, "call-1", out.Error.RequestID)
	require.Equal(t, "UNAVAILABLE: listing tasks: the database cannot be reached (connection refused) (request id call-1)", res.Content[0].(*sdk.TextContent).Text)

	require.True(t, errors.As(srv.resourceError(requestid.WithID(context.Background(), "call-2"), "switchyard://tasks/x", ee), &rpc))
	require.Equal(t, "listing tasks: the database cannot be reached (connection refused) (request id call-2)", rpc.Message)
	require.JSONEq(t, `{"uri": "switchyard://tasks/x", "code": "UNAVAILABLE", "requestId": "call-2"}`, string(rpc.Data))

	// An error told in full names no request.
	res, out, _ = srv.failure(requestid.WithID(context.Background(), "call-3"), &engine.Error{Code: engine.CodeInvalidInput, Message: "bad"})
	require.Empty(t, out.Error.RequestID)
	require.NotContains(t, res.Content[0].(*sdk.TextContent).Text, "call-3")

	plain := &engine.Error{Code: engine.CodeInvalidInput, Field: "action.selector", Message: `"xpath://[[" is not a valid selector`}
	require.Equal(t, plain.Message, toolError(plain).Message)
}
