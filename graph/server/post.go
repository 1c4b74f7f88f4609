// GraphQL over HTTP's POST and GET, as the GraphQL-over-HTTP specification
// reads it (graphql-http's server audits check it in graph/server/audit):
// gqlgen's POST and GET transports with these differences.
//
//   - Parameters other than query, operationName, variables and extensions
//     (a misspelt "qeury") are a 400 that names them (POST).
//   - A mutation over GET is 405 (Allow: POST), as the specification says.
//   - A request that fails before it runs (parse, validation, variable
//     coercion) is 200 when the client accepts application/json, and 400,
//     without a data entry, under application/graphql-response+json.
//   - A refusal of the caller (UNAUTHENTICATED, FORBIDDEN, RATE_LIMITED)
//     has its own status: see refusalStatus.
//
// Requests no transport serves get a JSON error that says what is missing
// (unsupported), not gqlgen's "transport not supported".

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/model"
)

const (
	mediaJSON            = "application/json"
	mediaGraphQLResponse = "application/graphql-response+json"
)

// postTransport serves POST requests with a JSON body.
type postTransport struct {
	vars *varCheck
	keys bodyKeys    // object keys the body decoder shares (jsonbody.go)
	fast *submitFast // the submitTask fast path (fastsubmit.go); nil: none
}

var _ graphql.Transport = postTransport{}

func (postTransport) Supports(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" || r.Method != http.MethodPost {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == mediaJSON
}

// The Content-Type values of answers, shared: a header's value slice of
// length and capacity one is never written in place (Header.Add appends to
// a copy).
var (
	contentTypeJSON            = []string{mediaJSON}
	contentTypeGraphQLResponse = []string{mediaGraphQLResponse}
)

// setContentType sets the answer's media type without allocating its
// value.
func setContentType(w http.ResponseWriter, media string) {
	switch media {
	case mediaJSON:
		w.Header()["Content-Type"] = contentTypeJSON
	case mediaGraphQLResponse:
		w.Header()["Content-Type"] = contentTypeGraphQLResponse
	default:
		w.Header().Set("Content-Type", media)
	}
}

// responseType is the media type of the answer: the first of the client's
// Accept that the server has (application/json for */* and none).
func responseType(r *http.Request) string {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return mediaJSON
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "*/*", "application/*", mediaJSON:
			return mediaJSON
		case mediaGraphQLResponse:
			return mediaGraphQLResponse
		}
	}
	return mediaGraphQLResponse
}

func (t postTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	media := responseType(r)
	setContentType(w, media)
	start := graphql.Now()
	body, err := bodyBytes(r)
	if err != nil {
		writeGraphQL(w, http.StatusBadRequest, &graphql.Response{Errors: gqlerror.List{gqlerror.Errorf("reading the request body: %v", err)}})
		return
	}
	params := &graphql.RawParams{}
	typed, err := decodeParamsTyped(ctx, body, t.keys, t.vars, params)
	if err != nil {
		writeGraphQL(w, http.StatusBadRequest, &graphql.Response{Errors: gqlerror.List{badParams(err)}})
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	vars := params.Variables // run may swap the map; the typed values are in this one
	if !typed || t.fast == nil || !t.fast.serve(ctx, w, params, func(ctx context.Context) { run(ctx, w, exec, t.vars, media, params, false, typed) }) {
		run(ctx, w, exec, t.vars, media, params, false, typed)
	}
	if typed {
		releaseTyped(vars)
	}
}

// releaseTyped gives back the room of the batches read typed
// (model.SubmitTasksJSON.Release) once their request's response is
// written: nothing reads a request's input after that (the engine copies
// what it keeps of each item, and the resolver's payload, whose keys
// point into the items, is marshalled by then).
func releaseTyped(vars map[string]any) {
	for _, v := range vars {
		if b, ok := v.(*model.SubmitTasksJSON); ok {
			b.Release()
		}
	}
}

// run runs the operation of a request and writes its response; queryOnly
// (GET) refuses mutations and subscriptions with 405. vars, if not nil,
// spares gqlparser the variables it can vouch for (vars.go); typed says
// that params holds variables read typed (decodeParamsTyped).
func run(ctx context.Context, w http.ResponseWriter, exec graphql.GraphExecutor, vars *varCheck, media string, params *graphql.RawParams, queryOnly, typed bool) {
	ctx = vars.prepare(ctx, params, typed)
	oc, opErr := exec.CreateOperationContext(ctx, params)
	if opErr != nil {
		res := exec.DispatchError(graphql.WithOperationContext(ctx, oc), opErr)
		writeGraphQL(w, failedStatus(media, res.Errors), res)
		return
	}
	if op := oc.Doc.Operations.ForName(oc.OperationName); queryOnly && op != nil && op.Operation != ast.Query {
		w.Header().Set("Allow", "POST")
		writeGraphQL(w, http.StatusMethodNotAllowed, &graphql.Response{Errors: gqlerror.List{{Message: "GET runs queries only: send a " + string(op.Operation) + " with POST",
			Extensions: map[string]any{"code": string(engine.CodeInvalidInput), "retryable": false}}}})
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, oc)
	writeGraphQL(w, http.StatusOK, responses(ctx))
}

// getTransport serves GET requests: the parameters in the query string
// (variables and extensions as JSON), queries only.
type getTransport struct{ vars *varCheck }

var _ graphql.Transport = getTransport{}

func (getTransport) Supports(r *http.Request) bool {
	return r.Header.Get("Upgrade") == "" && r.Method == http.MethodGet
}

func (t getTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	media := responseType(r)
	w.Header().Set("Content-Type", media)
	start := graphql.Now()
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeGraphQL(w, http.StatusBadRequest, &graphql.Response{Errors: gqlerror.List{badParams(err)}})
		return
	}
	params := &graphql.RawParams{Query: q.Get("query"), OperationName: q.Get("operationName"), Headers: r.Header}
	for name, into := range map[string]*map[string]any{"variables": &params.Variables, "extensions": &params.Extensions} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(into); err != nil {
			writeGraphQL(w, http.StatusBadRequest, &graphql.Response{Errors: gqlerror.List{{Message: name + " is not a JSON object: " + err.Error(),
				Extensions: map[string]any{"code": string(engine.CodeInvalidInput), "field": name, "retryable": false}}}})
			return
		}
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	run(r.Context(), w, exec, t.vars, media, params, true, false)
}

// badParams explains a body that is not a GraphQL-over-HTTP request.
func badParams(err error) *gqlerror.Error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		msg = "unknown parameter " + name + ": a request has query, operationName, variables and extensions"
	} else {
		msg = "the body is not a GraphQL request ({\"query\": …, \"variables\": {…}}): " + msg
	}
	return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(engine.CodeInvalidInput), "retryable": false}}
}

// failedStatus is the status of a request that failed before it ran.
func failedStatus(media string, errs gqlerror.List) int {
	for _, e := range errs {
		if code, _ := e.Extensions["code"].(string); refusalStatus(code) != 0 {
			return refusalStatus(code)
		}
	}
	if media == mediaGraphQLResponse && errcode.GetErrorKind(errs) == errcode.KindProtocol {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// httpResponse is a GraphQL response as HTTP carries it: without a data
// entry when the operation did not run.
type httpResponse struct {
	Errors     gqlerror.List   `json:"errors,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Extensions map[string]any  `json:"extensions,omitempty"`
}

func writeGraphQL(w http.ResponseWriter, status int, res *graphql.Response) {
	if res == nil {
		res = &graphql.Response{Errors: gqlerror.List{gqlerror.Errorf("the operation gave no response")}}
	}
	if len(res.Errors) == 0 && len(res.Extensions) == 0 && plainJSON(res.Data) {
		// The common answer, data alone: what json.Marshal would write,
		// without its second pass over the data.
		b := make([]byte, 0, len(`{"data":}`)+len(res.Data))
		b = append(append(append(b, `{"data":`...), res.Data...), '}')
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	b, err := json.Marshal(httpResponse{Errors: res.Errors, Data: res.Data, Extensions: res.Extensions})
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(httpResponse{Errors: gqlerror.List{gqlerror.Errorf("encoding the response: %v", err)}})
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// unsupported answers the requests no transport serves, saying what would
// be served.
type unsupported struct{}

var _ graphql.Transport = unsupported{}

func (unsupported) Supports(*http.Request) bool { return true }

func (unsupported) Do(w http.ResponseWriter, r *http.Request, _ graphql.GraphExecutor) {
	status, msg := http.StatusMethodNotAllowed, "/graphql serves GET, POST (Content-Type: application/json), WebSocket upgrades and POST with Accept: text/event-stream"
	switch ct := r.Header.Get("Content-Type"); {
	case r.Method == http.MethodPut:
		// graphql-sse's single connection mode reserves a stream with a PUT.
		msg = "graphql-sse's single connection mode is not served; use its distinct connections mode: POST the operation with Accept: text/event-stream"
	case r.Method != http.MethodPost:
	case ct == "":
		status, msg = http.StatusUnsupportedMediaType, "the POST has no Content-Type: send Content-Type: application/json and a body {\"query\": …, \"variables\": {…}}"
	default:
		status, msg = http.StatusUnsupportedMediaType, "Content-Type "+ct+" is not served: send Content-Type: application/json and a body {\"query\": …, \"variables\": {…}}"
	}
	if status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", "GET, POST, OPTIONS")
	}
	w.Header().Set("Content-Type", mediaJSON)
	writeGraphQL(w, status, &graphql.Response{Errors: gqlerror.List{{Message: msg,
		Extensions: map[string]any{"code": string(engine.CodeInvalidInput), "retryable": false}}}})
}

// plainJSON reports whether data, the data gqlgen wrote (valid and compact
// JSON), is what json.Marshal would write for it: not empty, and with none
// of the characters it escapes for HTML (<, >, &, U+2028, U+2029).
func plainJSON(data json.RawMessage) bool {
	return len(data) > 0 && !bytes.ContainsAny(data, "<>&\u2028\u2029")
}
