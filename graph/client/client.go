// Package client is a small GraphQL client for Switchyard's API: queries and
// mutations over HTTP, subscriptions over WebSocket (graphql-transport-ws or
// graphql-ws) and Server-Sent Events. The tests, `switchyard bench` and the
// command-line verbs use it; any GraphQL client works as well.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Request is one GraphQL operation.
type Request struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables,omitempty"`
	OperationName string         `json:"operationName,omitempty"`
}

// Response is a GraphQL response.
type Response struct {
	Data   json.RawMessage `json:"data"`
	Errors Errors          `json:"errors,omitempty"`
	// Extensions are the response's own (not an error's): submitTask's
	// `replayed`, for one.
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Error is one GraphQL error.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

func (e *Error) Error() string {
	if c := e.Code(); c != "" {
		return c + ": " + e.Message
	}
	return e.Message
}

// Code returns extensions.code, or "".
func (e *Error) Code() string {
	c, _ := e.Extensions["code"].(string)
	return c
}

// Field returns extensions.field, or "".
func (e *Error) Field() string {
	f, _ := e.Extensions["field"].(string)
	return f
}

// Errors are the errors of a response. As an error, it reads as its first.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", es[0].Error(), len(es)-1)
}

// Client talks to one GraphQL endpoint.
type Client struct {
	// URL is the endpoint, e.g. http://127.0.0.1:8080/graphql.
	URL string
	// HTTP is the client for queries, mutations and SSE; default
	// http.DefaultClient.
	HTTP *http.Client
	// Header is sent with every request (and as the WebSocket
	// connection_init payload).
	Header http.Header
}

// New returns a client of the endpoint at url.
func New(url string) *Client {
	return &Client{URL: url, HTTP: http.DefaultClient, Header: http.Header{}}
}

// StatusError is an HTTP answer without a GraphQL response.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// Raw sends an operation by POST and returns the response and its HTTP
// status. A body that is not a GraphQL response is a *StatusError.
func (c *Client) Raw(ctx context.Context, req Request) (*Response, int, error) {
	if err := checkUTF8(req.Query, req.Variables); err != nil {
		return nil, 0, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, 0, fmt.Errorf("encode request: %w", err)
	}
	return c.RawBody(ctx, body)
}

// RawBody posts a request body as it is.
func (c *Client) RawBody(ctx context.Context, body []byte) (*Response, int, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	c.headers(hr)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/graphql-response+json, application/json")
	res, err := c.httpClient().Do(hr)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, res.StatusCode, fmt.Errorf("read response: %w", err)
	}
	var out Response
	if err := json.Unmarshal(data, &out); err != nil || (out.Data == nil && out.Errors == nil) {
		return nil, res.StatusCode, &StatusError{Status: res.StatusCode, Body: strings.TrimSpace(string(data))}
	}
	return &out, res.StatusCode, nil
}

// Do runs an operation and decodes its data into out (unless out is nil).
// GraphQL errors come back as Errors, after out is filled with whatever data
// there was.
func (c *Client) Do(ctx context.Context, query string, vars map[string]any, out any) error {
	res, _, err := c.Raw(ctx, Request{Query: query, Variables: vars})
	if err != nil {
		return err
	}
	if out != nil && len(res.Data) > 0 && string(res.Data) != "null" {
		if err := json.Unmarshal(res.Data, out); err != nil {
			return fmt.Errorf("decode data: %w", err)
		}
	}
	if len(res.Errors) > 0 {
		return res.Errors
	}
	return nil
}

// Get runs a query by HTTP GET.
func (c *Client) Get(ctx context.Context, query string, vars map[string]any, out any) error {
	if err := checkUTF8(query, vars); err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return err
	}
	q := hr.URL.Query()
	q.Set("query", query)
	if vars != nil {
		v, err := json.Marshal(vars)
		if err != nil {
			return err
		}
		q.Set("variables", string(v))
	}
	hr.URL.RawQuery = q.Encode()
	c.headers(hr)
	res, err := c.httpClient().Do(hr)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var r Response
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		return &StatusError{Status: res.StatusCode, Body: err.Error()}
	}
	if out != nil && len(r.Data) > 0 && string(r.Data) != "null" {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return fmt.Errorf("decode data: %w", err)
		}
	}
	if len(r.Errors) > 0 {
		return r.Errors
	}
	return nil
}

func (c *Client) headers(r *http.Request) {
	for k, vs := range c.Header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}
