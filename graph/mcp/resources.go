// Resources: a task (its state and result) and an artifact (a screenshot, a
// PDF, a large result), readable by whoever may read the task — an agent
// token reads its own agent's only, as over GraphQL and /artifacts.

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/graph/resolvers"
)

// Resource URIs.
const (
	taskPrefix     = "switchyard://tasks/"
	artifactPrefix = "switchyard://artifacts/"
)

func artifactURI(id string) string { return artifactPrefix + id }

// CodeForbidden is the JSON-RPC error code of a resource the caller may not
// read (in the implementation-defined range, clear of the codes the SDK's
// JSON-RPC layer uses: -32001 and -32003..-32005).
const CodeForbidden = -32010

// maxArtifactBytes bounds the artifact a resource read returns.
const maxArtifactBytes = 32 << 20

func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{Name: "task", Title: "A task", URITemplate: taskPrefix + "{id}",
		MIMEType: "application/json", Description: "A task's state, attempts and result, as JSON."}, withResourceRequest(s.readTask))
	s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{Name: "artifact", Title: "An artifact", URITemplate: artifactPrefix + "{id}",
		Description: "A task's screenshot, PDF or large result."}, withResourceRequest(s.readArtifactResource))
}

// withResourceRequest gives a resource read's context its HTTP request's id
// (withCallRequest).
func withResourceRequest(h sdk.ResourceHandler) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return h(withCallRequest(ctx, req.Extra), req)
	}
}

// resourceError turns an error of the resolvers into a JSON-RPC error.
func resourceError(uri string, err error) error {
	var ee *engine.Error
	switch {
	case engine.IsCode(err, engine.CodeNotFound):
		return sdk.ResourceNotFoundError(uri)
	case errors.As(err, &ee):
		code := int64(jsonrpc.CodeInvalidParams)
		if ee.Code == "FORBIDDEN" || ee.Code == "UNAUTHENTICATED" {
			code = CodeForbidden
		}
		data, _ := json.Marshal(map[string]any{"uri": uri, "code": string(ee.Code)})
		return &jsonrpc.Error{Code: code, Message: resolvers.Message(ee), Data: data}
	}
	return err
}

func (s *Server) readTask(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id := strings.TrimPrefix(uri, taskPrefix)
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err == nil {
		err = s.allow(c, "Query", "task")
	}
	if err != nil {
		return nil, s.resourceError(ctx, uri, err)
	}
	mt, err := s.opts.Queries.Task(c.ctx(ctx), id)
	if err != nil {
		return nil, s.resourceError(ctx, uri, err)
	}
	body, err := json.MarshalIndent(viewOf(mt.T), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode task %s: %w", id, err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(body)}}}, nil
}

func (s *Server) readArtifactResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id := strings.TrimPrefix(uri, artifactPrefix)
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err == nil {
		err = s.allow(c, "Query", "task")
	}
	if err != nil {
		return nil, s.resourceError(ctx, uri, err)
	}
	if s.opts.Artifacts == nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	a, body, err := s.opts.Artifacts.Open(ctx, id)
	if errors.Is(err, artifact.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("open artifact %s: %w", id, err)
	}
	defer body.Close()
	// The artifact is the task's: whoever may not read the task learns
	// nothing of it, not even that it exists.
	if _, err := s.opts.Queries.Task(c.ctx(ctx), a.TaskID); err != nil {
		if engine.IsCode(err, "FORBIDDEN") {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		return nil, s.resourceError(ctx, uri, err)
	}
	if a.Size > maxArtifactBytes {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("artifact %s is %d bytes; read it over HTTP at /artifacts/%s", id, a.Size, id)}
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("read artifact %s: %w", id, err)
	}
	rc := &sdk.ResourceContents{URI: uri, MIMEType: a.ContentType}
	if strings.HasPrefix(a.ContentType, "application/json") || strings.HasPrefix(a.ContentType, "text/") {
		rc.Text = string(data)
	} else {
		rc.Blob = data
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}
