package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
)

// fastPair is two servers set up alike, one of which answers submitTask
// without its fast path: the reference.
type fastPair struct {
	fast, ref       *bundle
	fastLog, refLog *syncBuffer
	tokens          map[string]string
}

func newFastPair(t *testing.T, maxQueued int) *fastPair {
	t.Helper()
	tokens, secrets := withTokens(t, [3]string{"bot", "agent", "agent-a"}, [3]string{"ops", "operator", ""}, [3]string{"viewer", "reader", ""})
	p := &fastPair{fastLog: &syncBuffer{}, refLog: &syncBuffer{}, tokens: secrets}
	start := func(logs *syncBuffer, off bool) *bundle {
		lanes := engine.DefaultLanes()
		for i := range lanes {
			lanes[i].Paused = true // the answers' states hold still
		}
		return setup(t, tokens, func(o *setupOptions) {
			o.config = engine.Config{Lanes: lanes, MaxQueued: maxQueued}
			// A rate that does not refill within the test: a burst of 40 per
			// token, for the two paths to spend alike.
			o.limits = resolvers.Limits{MutationsPerSecond: 1e-6, MutationBurst: 40}
			o.logs = logs
			o.engine = func(e *engine.Engine) resolvers.Engine { return panicky{e} }
			prev := o.server
			o.server = func(so *server.Options) {
				prev(so)
				if off {
					server.WithoutSubmitFastPath(so)
				}
			}
		})
	}
	p.fast, p.ref = start(p.fastLog, false), start(p.refLog, true)
	return p
}

// answer is what a client sees of a response, ids and timings made
// comparable.
type answer struct {
	Status      int
	ContentType string
	RetryAfter  string
	Body        string
}

var (
	ulid        = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)
	waits       = regexp.MustCompile(`retry in [0-9hms.]+|"retryAfterMs":\d+|"requestId":"[^"]+"`) // the rate's refill differs by the time between two requests; ids are random
	logVolatile = regexp.MustCompile(`(?m)^\S+ |(remote|request_id|took)=\S+`)
)

func normalize(s string) string {
	return waits.ReplaceAllString(ulid.ReplaceAllString(s, "<id>"), "<varies>")
}

// post sends the same request to a server.
func (p *fastPair) post(t *testing.T, b *bundle, token, accept, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+"/graphql", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+p.tokens[token])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return answer{Status: res.StatusCode, ContentType: res.Header.Get("Content-Type"), RetryAfter: res.Header.Get("Retry-After"), Body: normalize(string(got))}
}

// both sends a request to each server and requires the same answer and
// the same audit lines; it returns the answer.
func (p *fastPair) both(t *testing.T, token, accept, body string) answer {
	t.Helper()
	ref := p.post(t, p.ref, token, accept, body)
	fast := p.post(t, p.fast, token, accept, body)
	require.Equal(t, ref, fast, "the fast path answers as the executor: %s", body)
	refAudit, fastAudit := auditLines(p.refLog.take()), auditLines(p.fastLog.take())
	require.Equal(t, refAudit, fastAudit, "the fast path logs as the executor: %s", body)
	return ref
}

// auditLines returns the audit log's lines, without what differs between
// two servers (time, client address, request id, duration, ids).
func auditLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "audit:") {
			out = append(out, normalize(logVolatile.ReplaceAllString(line, "")))
		}
	}
	return out
}

func submitBody(query string, in map[string]any) string {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"in": in}})
	return string(b)
}

// TestSubmitFastPathAnswersAsTheExecutor sends the same requests to a
// server with the submitTask fast path and one without: every answer
// (status, media type, Retry-After, body) and every audit line is the
// same, and the fast path answered the plain ones itself.
func TestSubmitFastPathAnswersAsTheExecutor(t *testing.T) {
	p := newFastPair(t, 1000)
	plain := `mutation Submit ($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`
	aliased := `mutation ($in: SubmitTaskInput!) { t: submitTask(input: $in) { __typename key: id state agentId lane id state } }`
	click := map[string]any{"agentId": "agent-a", "action": map[string]any{"kind": "click", "selector": "css:#go"}}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range click {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	// A query's first request is the executor's (it parses and caches the
	// document); the fast path serves the next ones.
	for _, q := range []string{plain, aliased} {
		require.Equal(t, http.StatusOK, p.both(t, "bot", "", submitBody(q, click)).Status)
	}
	answered0, handed0 := p.fast.srv.SubmitFastPath()

	cases := []struct {
		name, token, accept, body string
		fast                      string // "answered", "handed" or "" (not taken)
	}{
		{"plain", "bot", "", submitBody(plain, click), "answered"},
		{"aliases, duplicates, every leaf", "bot", "", submitBody(aliased, click), "answered"},
		{"graphql-response+json", "ops", "application/graphql-response+json", submitBody(plain, with(map[string]any{"agentId": "agent-b"})), "answered"},
		{"a string JSON escapes for HTML", "ops", "", `{"query":` + quote(aliased) + `,"variables":{"in":{"agentId":"a<b>&c ","action":{"kind":"click"}}}}`, "answered"},
		{"keyed, first", "bot", "", submitBody(aliased, with(map[string]any{"idempotencyKey": "k-1"})), "answered"},
		{"keyed, replayed", "bot", "", submitBody(aliased, with(map[string]any{"idempotencyKey": "k-1"})), "answered"},
		{"keyed, differing", "bot", "", submitBody(aliased, with(map[string]any{"idempotencyKey": "k-1", "priority": "LOW"})), "handed"},
		{"another agent's task", "bot", "", submitBody(plain, with(map[string]any{"agentId": "agent-b"})), "handed"},
		{"an unknown lane", "ops", "", submitBody(plain, with(map[string]any{"lane": "nowhere"})), "handed"},
		{"an action the engine refuses", "ops", "", submitBody(plain, with(map[string]any{"action": map[string]any{"kind": "navigate"}})), "handed"},
		{"a resolver that panics", "ops", "", submitBody(plain, with(map[string]any{"agentId": "panic"})), "handed"},
		{"a role that may not submit", "viewer", "", submitBody(plain, click), ""},
		{"a role that may not submit, graphql-response+json", "viewer", "application/graphql-response+json", submitBody(plain, click), ""},
		{"an operation name that is not the document's", "ops", "", `{"query":` + quote(plain) + `,"operationName":"Other","variables":{"in":{"agentId":"a","action":{"kind":"click"}}}}`, ""},
		{"a variable the operation does not declare", "ops", "", `{"query":` + quote(plain) + `,"variables":{"in":{"agentId":"a","action":{"kind":"click"}},"x":1}}`, ""},
		{"extensions", "ops", "", `{"query":` + quote(plain) + `,"variables":{"in":{"agentId":"a","action":{"kind":"click"}}},"extensions":{"x":1}}`, ""},
		{"a null input", "ops", "", `{"query":` + quote(aliased) + `,"variables":{"in":null}}`, ""},
	}
	for _, c := range cases {
		a0, h0 := p.fast.srv.SubmitFastPath()
		p.both(t, c.token, c.accept, c.body)
		a1, h1 := p.fast.srv.SubmitFastPath()
		switch c.fast {
		case "answered":
			require.Equal(t, [2]int64{a0 + 1, h0}, [2]int64{a1, h1}, "%s: the fast path answers it", c.name)
		case "handed":
			require.Equal(t, [2]int64{a0, h0 + 1}, [2]int64{a1, h1}, "%s: the fast path hands it over", c.name)
		default:
			require.Equal(t, [2]int64{a0, h0}, [2]int64{a1, h1}, "%s: the executor serves it", c.name)
		}
	}
	answered, handed := p.fast.srv.SubmitFastPath()
	require.Positive(t, answered-answered0)
	require.Positive(t, handed-handed0)
	ref, _ := p.ref.srv.SubmitFastPath()
	require.Zero(t, ref, "the reference has no fast path")

	// The rate: each path takes one per request, a request handed over
	// included, and refuses the same request first with the same answer.
	for i := 0; ; i++ {
		require.Less(t, i, 100, "the burst of 40 ends")
		body := submitBody(plain, with(map[string]any{"lane": "nowhere"})) // handed over: taken once
		if i%2 == 0 {
			body = submitBody(plain, click)
		}
		if a := p.both(t, "bot", "", body); a.Status == http.StatusTooManyRequests {
			require.NotEmpty(t, a.RetryAfter)
			break
		}
	}
}

// TestSubmitFastPathQueueFull checks a refusal for a full queue, with its
// counts, and the plan of a query over the server's limits.
func TestSubmitFastPathQueueFull(t *testing.T) {
	p := newFastPair(t, 3)
	plain := `mutation Submit ($in: SubmitTaskInput!) { submitTask(input: $in) { id state } }`
	body := submitBody(plain, map[string]any{"agentId": "agent-a", "action": map[string]any{"kind": "click", "selector": "css:#go"}})
	var refused answer
	for i := range 5 {
		a := p.both(t, "bot", "", body)
		if i >= 3 {
			refused = a
		}
	}
	require.Contains(t, refused.Body, `"counts"`, "a full queue says its counts")
	answered, handed := p.fast.srv.SubmitFastPath()
	require.Equal(t, [2]int64{2, 2}, [2]int64{answered, handed}, "the first request is the executor's; two answered, two refused after running")
}

// panicky is an engine whose SubmitItem panics for the agent "panic".
type panicky struct{ resolvers.Engine }

func (p panicky) SubmitItem(ctx context.Context, spec engine.TaskSpec) (engine.ItemResult, error) {
	if spec.AgentID == "panic" {
		panic("a resolver's bug")
	}
	return p.Engine.SubmitItem(ctx, spec)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
