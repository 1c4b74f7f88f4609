// The Client: one base URL and one token, requests that carry the caller's
// context, headers and identity, and responses turned into raw JSON or *Error.

package pinchtab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Header names Switchyard adds to every request.
const (
	HeaderAgent = "X-Switchyard-Agent" // the submitting agent's id
	HeaderTask  = "X-Switchyard-Task"  // the task's id
	// HeaderTimeout is the milliseconds the attempt has left when the
	// request is sent: the built-in Chromium ends its work on the request
	// early enough to answer within them (PinchTab ignores it).
	HeaderTimeout = "X-Switchyard-Timeout"
)

// DefaultMaxResponseBytes bounds how much of a response body the client reads.
const DefaultMaxResponseBytes = 64 << 20

// Client talks to one PinchTab-compatible endpoint. It is safe for concurrent
// use.
type Client struct {
	base     *url.URL
	prefix   string // base.String(), to which escaped paths are appended
	bearer   string // "Bearer <token>", or "" when there is no token
	hc       *http.Client
	maxBytes int64
	// builtin is set once the instance's /health said it is Switchyard's
	// built-in Chromium (Health): its errors then name it (Name).
	builtin atomic.Bool
}

// Builtin is the implementation the built-in Chromium instance names in
// its /health answer ("implementation"), which tells it from PinchTab.
const Builtin = "switchyard-chromium"

// Name is what the client's errors call the instance: "chromium" once its
// /health said it is Switchyard's built-in Chromium, else "pinchtab" (the
// API it speaks).
func (c *Client) Name() string {
	if c.builtin.Load() {
		return "chromium"
	}
	return "pinchtab"
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc. The client
// never sets hc.Timeout: deadlines come from request contexts.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMaxResponseBytes bounds the size of the response bodies the client reads.
func WithMaxResponseBytes(n int64) Option { return func(c *Client) { c.maxBytes = n } }

// New returns a client for the instance at baseURL (for example
// "http://127.0.0.1:9867"), authenticating with token ("" sends no
// Authorization header).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("pinchtab: parse base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("pinchtab: base URL %q: scheme must be http or https", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("pinchtab: base URL %q has no host", baseURL)
	}
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, prefix: u.String(), hc: DefaultHTTPClient(), maxBytes: DefaultMaxResponseBytes}
	if token != "" {
		c.bearer = "Bearer " + token
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// DefaultHTTPClient returns the HTTP client a Client uses unless told
// otherwise: keep-alive connections, enough idle ones per host for a busy
// instance, and no overall timeout (contexts carry the deadlines).
func DefaultHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	tr.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: tr}
}

// BaseURL returns the endpoint the client talks to.
func (c *Client) BaseURL() string { return c.base.String() }

// RequestInfo names who a request is for. Its fields travel as headers.
type RequestInfo struct {
	AgentID string
	TaskID  string
	// Deadline is the attempt's, when it has one: each request says how
	// long it has left (HeaderTimeout).
	Deadline time.Time
}

type requestInfoKey struct{}

// WithRequestInfo returns a context whose requests carry info's ids as the
// X-Switchyard-Agent and X-Switchyard-Task headers.
func WithRequestInfo(ctx context.Context, info RequestInfo) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, info)
}

// Response is a raw answer from an instance.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request and returns the response when its status is 2xx, and
// an *Error otherwise. path is the request path ("/tabs/x/action"), already
// escaped; query may be nil; body is marshalled to JSON unless it is nil, a
// []byte or a json.RawMessage (sent as is). op names the operation in errors.
func (c *Client) Do(ctx context.Context, op, method, path string, query url.Values, body any) (*Response, error) {
	var payload []byte
	switch b := body.(type) {
	case nil:
	case json.RawMessage:
		payload = b
	case []byte:
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return nil, &Error{Op: op, Method: method, Path: path, Err: fmt.Errorf("encode request: %w", err)}
		}
	}
	req, sent, err := c.newRequest(ctx, method, path, query, payload)
	if err != nil {
		return nil, &Error{Op: op, Method: method, Path: path, Err: err}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, op, method, path, sent, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, responseError(op, method, path, resp)
	}
	data, err := readLimited(resp.Body, c.maxBytes)
	if err != nil {
		return nil, c.transportError(ctx, op, method, path, sent, fmt.Errorf("read response: %w", err))
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// DoJSON is Do for endpoints that answer JSON: it returns the body as raw
// JSON. A body that is not JSON comes back as a JSON string; an empty body as
// null.
func (c *Client) DoJSON(ctx context.Context, op, method, path string, query url.Values, body any) (json.RawMessage, error) {
	resp, err := c.Do(ctx, op, method, path, query, body)
	if err != nil {
		return nil, err
	}
	return asJSON(resp.Body), nil
}

// newRequest builds a request. sent reports, once the request is over,
// whether it was written whole to a connection (httptrace's WroteRequest
// without an error, on any of the transport's tries): from then on the
// instance may have received it and acted on it, whatever becomes of the
// connection (Error.Sent).
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, payload []byte) (req *http.Request, sent *atomic.Bool, err error) {
	sent = new(atomic.Bool)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			sent.Store(true)
		}
	}})
	target := c.prefix + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err = http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("build request: %w", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.bearer != "" {
		req.Header.Set("Authorization", c.bearer)
	}
	if info, ok := ctx.Value(requestInfoKey{}).(RequestInfo); ok {
		if info.AgentID != "" {
			req.Header.Set(HeaderAgent, info.AgentID)
		}
		if info.TaskID != "" {
			req.Header.Set(HeaderTask, info.TaskID)
		}
		if !info.Deadline.IsZero() {
			if left := time.Until(info.Deadline).Milliseconds(); left > 0 {
				req.Header.Set(HeaderTimeout, strconv.FormatInt(left, 10))
			}
		}
	}
	return req, sent, nil
}

// transportError wraps a failure that produced no HTTP status; sent says
// whether the request had been written whole (newRequest). When the context
// ended, the context's error is what the caller sees first.
func (c *Client) transportError(ctx context.Context, op, method, path string, sent *atomic.Bool, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return &Error{Op: op, Method: method, Path: path, Err: err, Sent: sent.Load()}
}

// readLimited reads all of r, refusing more than max bytes.
func readLimited(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("response larger than %d bytes", max)
	}
	return data, nil
}

// asJSON returns data as raw JSON: itself when it is JSON, a JSON string when
// it is text, null when it is empty.
func asJSON(data []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	s, _ := json.Marshal(string(data))
	return s
}

// tabPath returns "/tabs/{id}/{rest}" with the id escaped.
func tabPath(tabID, rest string) string {
	return "/tabs/" + url.PathEscape(tabID) + "/" + rest
}

// mergeObject returns the JSON object params with the members of fixed added
// after it, so that fixed wins when a key appears in both (decoders keep the
// last duplicate). params must be a JSON object or empty; fixed is a list of
// key/value pairs whose values are marshalled.
func mergeObject(params json.RawMessage, fixed ...any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(params) + 64)
	buf.WriteByte('{')
	n := 0
	if p := bytes.TrimSpace(params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if p[0] != '{' || !json.Valid(p) {
			return nil, errors.New("params must be a JSON object")
		}
		inner := bytes.TrimSpace(p[1 : len(p)-1])
		if len(inner) > 0 {
			buf.Write(inner)
			n++
		}
	}
	for i := 0; i+1 < len(fixed); i += 2 {
		v := fixed[i+1]
		if s, ok := v.(string); ok && s == "" {
			continue // empty strings are "not set"
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(&buf, fixed[i].(string))
		buf.WriteByte(':')
		if s, ok := v.(string); ok {
			writeJSONString(&buf, s)
		} else {
			val, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", fixed[i], err)
			}
			buf.Write(val)
		}
		n++
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// writeJSONString writes s as a JSON string: directly when it needs no
// escaping (the common case of kinds, selectors and ids on the forwarding
// path), through encoding/json otherwise.
func writeJSONString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			buf.Write(q)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}
