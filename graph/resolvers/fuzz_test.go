package resolvers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/schedule"
)

// codes are the values of extensions.code the API may answer with (the
// schema's ErrorCode, and gqlgen's own for requests it cannot run).
var codes = map[string]bool{
	"INVALID_INPUT": true, "NOT_FOUND": true, "CONFLICT": true, "QUEUE_FULL": true, "DRAINING": true, "CYCLE": true,
	"LIMIT": true, "UNAVAILABLE": true, "PLUGIN_INVALID": true, "UNAUTHENTICATED": true, "FORBIDDEN": true,
	"GRAPHQL_VALIDATION_FAILED": true, "GRAPHQL_PARSE_FAILED": true,
}

// operations run with the fuzzed input, each naming it $in.
var operations = []string{
	`mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id agentId lane state dependsOn parentId labels { key value } } }`,
	`mutation($in: SubmitTaskInput!) { submitTasks(input: {items: [{key: "k", task: $in}]}) { accepted refused items { task { id agentId } error { code field } } } }`,
	`mutation($in: SubmitTaskInput!) { createSchedule(input: {name: "fz", kind: EVERY, everyMs: 3600000, template: $in}) { id template { agentId } } }`,
}

// FuzzSubmitTaskInput sends arbitrary JSON as a SubmitTaskInput through the
// GraphQL layer — gqlgen's coercion, the resolvers' validation, the
// authorization of an agent token, the engine — as an admin and as agent
// "a". Whatever the input: nothing panics, every error carries a code of
// the API (never INTERNAL), an INVALID_INPUT names its field under the
// input, and an agent's accepted submission is its own.
func FuzzSubmitTaskInput(f *testing.F) {
	for _, seed := range []string{
		`{"agentId":"a","action":{"kind":"click","selector":"css:#go"}}`,
		`{"agentId":"a","lane":"main","priority":"HIGH","action":{"kind":"navigate","params":{"url":"https://example.com"}},"labels":[{"key":"k","value":"v"}]}`,
		`{"agentId":"a","instruction":"summarise the page","sessionKey":"s","queueMode":"INTERRUPT"}`,
		`{"agentId":"a","action":{"kind":"fill","params":[1,2]},"timeoutMs":0}`,
		`{"agentId":"b","action":{"kind":"click"},"dependsOn":["x","x"],"deadline":"2000-01-01T00:00:00Z"}`,
		`{"agentId":"","action":{"kind":"click"},"retryPolicy":{"maxAttempts":1000,"multiplier":-1}}`,
		`{"agentId":"a","action":{"kind":"cl ick"},"webhookUrl":"ftp://x","idempotencyKey":"` + strings.Repeat("k", 300) + `"}`,
		`{"agentId":"a","action":{"kind":"click"},"parentId":"nope","tabId":"t","instanceId":"i","lane":"no-such-lane"}`,
		`{"agentId":"a\u0000","action":{"kind":"click","ref":"e1"},"labels":[{"key":"","value":"v"},{"key":"k","value":"v"}]}`,
		`{"agentId":1}`, `[]`, `null`, `{"agentId":"a","action":{"kind":"click","params":{"a":{"b":{"c":[null,true,1e999]}}}}}`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	// The stack is rebuilt every few hundred cases, so that the tasks and
	// schedules the fuzzer creates do not pile up.
	var stack *fuzzStack
	cases := 0
	f.Cleanup(func() {
		if stack != nil {
			stack.close()
		}
	})
	admin := auth.Anonymous()
	agent := &auth.Identity{Name: "bot", Role: auth.RoleAgent, AgentID: "a"}

	f.Fuzz(func(t *testing.T, input string, asAgent bool) {
		if len(input) > 64<<10 || !json.Valid([]byte(input)) {
			return
		}
		if stack == nil || cases%500 == 0 {
			if stack != nil {
				stack.close()
			}
			stack = newFuzzStack(t)
		}
		cases++
		srv := stack.srv
		id := admin
		if asAgent {
			id = agent
		}
		for _, op := range operations {
			body, _ := json.Marshal(map[string]any{"query": op, "variables": map[string]json.RawMessage{"in": json.RawMessage(input)}})
			req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req = req.WithContext(auth.WithIdentity(req.Context(), id))
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			var res struct {
				Data   map[string]json.RawMessage
				Errors []struct {
					Message    string
					Extensions map[string]any
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
				t.Fatalf("%s: not a GraphQL response (%d): %s", op, rec.Code, rec.Body)
			}
			for _, e := range res.Errors {
				code, _ := e.Extensions["code"].(string)
				if !codes[code] {
					t.Fatalf("input %s: an error with code %q: %s", input, code, e.Message)
				}
				if field, _ := e.Extensions["field"].(string); code == "INVALID_INPUT" && field != "" && !strings.HasPrefix(field, "input") {
					t.Fatalf("input %s: INVALID_INPUT names %q, not a field of the input", input, field)
				}
			}
			if asAgent && len(res.Data) > 0 {
				if bytes.Contains(rec.Body.Bytes(), []byte(`"agentId"`)) && !agentIs(rec.Body.Bytes(), "a") {
					t.Fatalf("input %s: an agent token's accepted work belongs to another agent: %s", input, rec.Body)
				}
			}
		}
	})
}

// fuzzStack is an engine, a scheduler and the GraphQL handler over them.
type fuzzStack struct {
	eng   *engine.Engine
	sched *schedule.Scheduler
	r     *resolvers.Resolver
	srv   *handler.Server
}

func newFuzzStack(t *testing.T) *fuzzStack {
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: enginetest.NewExecutor(),
		Config: engine.Config{EventBuffer: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sched := schedule.New(eng, clock.Real{}, nil)
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := resolvers.New(resolvers.Options{Engine: eng, Schedules: sched})
	srv := handler.New(r.ExecutableSchema())
	srv.AddTransport(transport.POST{})
	srv.SetErrorPresenter(resolvers.PresentError)
	return &fuzzStack{eng: eng, sched: sched, r: r, srv: srv}
}

func (s *fuzzStack) close() {
	s.sched.Stop()
	s.r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	_ = s.eng.Shutdown(ctx)
}

// agentIs reports whether every "agentId" value in a JSON document is want.
func agentIs(doc []byte, want string) bool {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return false
	}
	ok := true
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, isStr := e.(string); k == "agentId" && isStr && s != want {
					ok = false
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return ok
}
