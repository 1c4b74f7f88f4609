package server_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func get(t *testing.T, url string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body), res.Header
}

func TestHealthReadinessAndMetricsAreServed(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed)
	status, body, _ := get(t, b.base+"/healthz")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok\n", body)
	status, _, _ = get(t, b.base+"/readyz")
	require.Equal(t, http.StatusOK, status)

	b.submitMany(t, "m", 10)
	res, err := http.Post(b.base+"/graphql", "application/json", strings.NewReader(`{"query":`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	conn, err := b.c.Dial(ctxFor(t), client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Subscribe(ctxFor(t), `subscription { stats { inFlight } }`, nil)
	require.NoError(t, err)
	waitfor.Eventually(t, "the metrics show the work and the subscription", func() bool {
		_, body, _ := get(t, b.base+"/metrics")
		return strings.Contains(body, `switchyard_tasks_ended_total{state="SUCCEEDED"} 10`) &&
			strings.Contains(body, `switchyard_graphql_subscriptions{subscription="stats"} 1`)
	})
	_, body, _ = get(t, b.base+"/metrics")
	for _, want := range []string{
		`switchyard_tasks{state="QUEUED"} 0`,
		`switchyard_in_flight 0`,
		`switchyard_queue_depth 0`,
		`switchyard_lane_queue_depth{lane="main"} 0`,
		`switchyard_lane_max_in_flight{lane="main"} 30`,
		`switchyard_dispatch_latency_seconds_count 10`,
		`switchyard_dispatch_latency_seconds_bucket{le="+Inf"} 10`,
		`switchyard_engine_events_total{kind="submitted"} 10`,
		`switchyard_http_requests_total{code="200",handler="graphql"}`,
		`switchyard_http_requests_total{code="400",handler="graphql"} 1`,
		`switchyard_graphql_subscription_slots `,
		`switchyard_graphql_subscription_stalls_total `,
		`go_goroutines`,
	} {
		require.Contains(t, body, want)
	}
}

func TestArtifactsAreServedByIDWithTheirTypeAndDigest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	png := []byte("\x89PNG\r\n\x1a\nnot really a picture")
	a, err := b.artifacts.Put(context.Background(), "image/png", "task-1", png)
	require.NoError(t, err)
	status, body, h := get(t, b.base+"/artifacts/"+a.ID)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, string(png), body)
	require.Equal(t, "image/png", h.Get("Content-Type"))
	require.Equal(t, `"`+a.SHA256+`"`, h.Get("ETag"))
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	status, _, _ = get(t, b.base+"/artifacts/"+a.ID, "If-None-Match", `"`+a.SHA256+`"`)
	require.Equal(t, http.StatusNotModified, status)
	status, _, _ = get(t, b.base+"/artifacts/0123456789abcdef0123456789abcdef")
	require.Equal(t, http.StatusNotFound, status)
}

func TestQueriesOverGETAndThePlaygroundPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var out struct{ Lanes []struct{ Name string } }
	require.NoError(t, b.c.Get(ctxFor(t), `{ lanes { name } }`, nil, &out))
	require.Equal(t, []struct{ Name string }{{"main"}, {"subagent"}, {"team"}, {"cron"}}, out.Lanes)
	err := b.c.Get(ctxFor(t), `mutation { drain { draining } }`, nil, nil)
	require.Error(t, err, "mutations are refused over GET")

	status, body, h := get(t, b.base+"/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "<title>Switchyard</title>")
	require.Contains(t, h.Get("Content-Security-Policy"), "default-src 'none'")
}

func TestLanesAgentsPlanAndPoliciesCanBeReadAndTuned(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	var lane struct {
		UpdateLane struct {
			Name                   string
			MaxInFlight, MaxQueued int
			DropPolicy             string
			Paused                 bool
			TimeoutMs              int
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "team", input: {maxInFlight: 3, maxQueued: 50, dropPolicy: DROP_OLDEST, paused: true, timeoutMs: 9000}) {
		name maxInFlight maxQueued dropPolicy paused timeoutMs } }`, nil, &lane))
	require.Equal(t, "team", lane.UpdateLane.Name)
	require.Equal(t, 3, lane.UpdateLane.MaxInFlight)
	require.Equal(t, 50, lane.UpdateLane.MaxQueued)
	require.Equal(t, "DROP_OLDEST", lane.UpdateLane.DropPolicy)
	require.True(t, lane.UpdateLane.Paused)
	require.Equal(t, 9000, lane.UpdateLane.TimeoutMs)

	// A paused lane admits but does not dispatch; the plan says why.
	id := b.submit(t, "planner", map[string]any{"lane": "team"})
	var plan struct {
		Plan struct {
			Steps   []struct{ TaskID string }
			Skipped []struct {
				Lane, AgentID, Reason string
				Tasks                 int
			}
		}
	}
	require.NoError(t, b.c.Do(ctx, `{ plan(limit: 5) { steps { taskId } skipped { lane agentId reason tasks } } }`, nil, &plan))
	require.Empty(t, plan.Plan.Steps)
	require.Len(t, plan.Plan.Skipped, 1)
	require.Equal(t, "team", plan.Plan.Skipped[0].Lane)
	require.Contains(t, plan.Plan.Skipped[0].Reason, "paused")
	require.Equal(t, "QUEUED", b.state(t, id))

	var pos struct{ Task struct{ Position *int } }
	require.NoError(t, b.c.Do(ctx, `query($id: ID!) { task(id: $id) { position } }`, map[string]any{"id": id}, &pos))
	require.NotNil(t, pos.Task.Position)
	require.Equal(t, 0, *pos.Task.Position)

	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "team", input: {paused: false}) { paused } }`, nil, nil))
	waitfor.Eventually(t, "the resumed lane dispatches", func() bool { return b.exec.Run(id) != nil })

	err := b.c.Do(ctx, `mutation { updateLane(name: "team", input: {maxQueued: 0}) { name } }`, nil, nil)
	e := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "input.maxQueued", e.Field())

	var agent struct {
		SetAgent struct {
			ID                  string
			Weight, MaxInFlight int
			InFlight            int
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation { setAgent(id: "planner", input: {weight: 3, maxInFlight: 7}) { id weight maxInFlight inFlight } }`, nil, &agent))
	require.Equal(t, "planner", agent.SetAgent.ID)
	require.Equal(t, 3, agent.SetAgent.Weight)
	require.Equal(t, 7, agent.SetAgent.MaxInFlight)
	require.Equal(t, 1, agent.SetAgent.InFlight)
	var agents struct{ Agents []struct{ ID string } }
	require.NoError(t, b.c.Do(ctx, `{ agents { id } }`, nil, &agents))
	require.Contains(t, agents.Agents, struct{ ID string }{"planner"})

	var pol struct {
		Policies []struct {
			Slot, Name string
			Lane       *string
		}
	}
	require.NoError(t, b.c.Do(ctx, `{ policies { slot lane name } }`, nil, &pol))
	require.Len(t, pol.Policies, 3)
	require.Equal(t, "SELECTION", pol.Policies[0].Slot)
	require.Nil(t, pol.Policies[0].Lane)
}

// fakeInstance answers health checks like a browser instance (a PinchTab
// bridge): /health, then its tab list, two tabs open.
func fakeInstance(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/health":
			_, _ = w.Write([]byte(`{"status":"ok","tabs":2}`))
		case "/tabs": // the tab count comes from here, as on a real instance
			_, _ = w.Write([]byte(`{"tabs":[{"id":"tab-1","url":"about:blank"},{"id":"tab-2","url":"about:blank"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestInstancesAreRegisteredUpdatedRemovedAndStreamed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.registry = true })
	ctx := ctxFor(t)
	inst := fakeInstance(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	events, err := conn.Subscribe(ctx, `subscription { instanceEvents { seq kind instance { id health capacity } reason missed } }`, nil)
	require.NoError(t, err)
	eventKind := func() (string, string) {
		m, err := events.Next(ctx)
		require.NoError(t, err)
		var out struct {
			InstanceEvents struct {
				Kind     string
				Instance struct{ ID, Health string }
			}
		}
		require.NoError(t, json.Unmarshal(m.Data, &out))
		return out.InstanceEvents.Kind, out.InstanceEvents.Instance.ID
	}
	b.waitSubscribed(t, "instanceEvents", 1)

	var reg struct {
		RegisterInstance struct {
			ID, URL, Kind, Health string
			Capacity              int
			HasToken              bool
			Labels                []struct{ Key, Value string }
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation($url: String!) { registerInstance(input: {id: "b1", url: $url, token: "secret", capacity: 2,
		labels: [{key: "zone", value: "a"}]}) { id url kind health capacity hasToken labels { key value } } }`, map[string]any{"url": inst.URL}, &reg))
	require.Equal(t, "b1", reg.RegisterInstance.ID)
	require.Equal(t, "INSTANCE", reg.RegisterInstance.Kind)
	require.True(t, reg.RegisterInstance.HasToken)
	require.Equal(t, 2, reg.RegisterInstance.Capacity)
	kind, id := eventKind()
	require.Equal(t, "REGISTERED", kind)
	require.Equal(t, "b1", id)
	kind, _ = eventKind()
	require.Equal(t, "HEALTHY", kind, "the first health check passes")

	var list struct {
		Instances []struct {
			ID, Health string
			Tabs       int
		}
	}
	require.NoError(t, b.c.Do(ctx, `{ instances { id health tabs } }`, nil, &list))
	require.Equal(t, []struct {
		ID, Health string
		Tabs       int
	}{{"b1", "HEALTHY", 2}}, list.Instances)

	require.NoError(t, b.c.Do(ctx, `mutation { updateInstance(id: "b1", input: {capacity: 5}) { capacity } }`, nil, nil))
	kind, _ = eventKind()
	require.Equal(t, "UPDATED", kind)

	e := gqlErr(t, b.c.Do(ctx, `mutation($url: String!) { registerInstance(input: {id: "b1", url: $url}) { id } }`, map[string]any{"url": inst.URL}, nil))
	require.Equal(t, "CONFLICT", e.Code())
	e = gqlErr(t, b.c.Do(ctx, `mutation { registerInstance(input: {id: "b2", url: "not a url"}) { id } }`, nil, nil))
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "input.url", e.Field())

	var rm struct{ RemoveInstance struct{ ID string } }
	require.NoError(t, b.c.Do(ctx, `mutation { removeInstance(id: "b1") { id } }`, nil, &rm))
	require.Equal(t, "b1", rm.RemoveInstance.ID)
	for {
		kind, _ = eventKind()
		if kind != "HEALTHY" { // a check may have finished meanwhile
			break
		}
	}
	require.Equal(t, "REMOVED", kind)
	e = gqlErr(t, b.c.Do(ctx, `mutation { removeInstance(id: "b1") { id } }`, nil, nil))
	require.Equal(t, "NOT_FOUND", e.Code())

	// A chat instance's dialect.
	e = gqlErr(t, b.c.Do(ctx, `mutation { registerInstance(input: {id: "b3", url: "http://127.0.0.1:1", kind: PINCHTAB, dialect: BROWSEROS}) { id } }`, nil, nil))
	require.Equal(t, "INVALID_INPUT", e.Code(), "a dialect is for chat instances")
	require.Equal(t, "input.dialect", e.Field())
	var chat struct {
		RegisterInstance struct{ Kind, Dialect string }
	}
	require.NoError(t, b.c.Do(ctx, `mutation { registerInstance(input: {id: "bos", url: "http://127.0.0.1:1", kind: CHAT, dialect: BROWSEROS}) { kind dialect } }`, nil, &chat))
	require.Equal(t, "BROWSEROS", chat.RegisterInstance.Dialect)
	require.NoError(t, b.c.Do(ctx, `mutation { updateInstance(id: "bos", input: {dialect: GENERIC}) { dialect } }`, nil, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { removeInstance(id: "bos") { id } }`, nil, nil))
}

// Each WebAssembly policy plugin has its own series: the built-in
// selection plugin decides the submissions here, so its calls show.
func TestMetricsShowEachPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	require.NoError(t, b.plugins.SetPolicy(ctxFor(t), policy.SlotSelection, "", "priority"))
	b.submitMany(t, "m", 5)
	waitfor.Eventually(t, "the built-in selection plugin's decisions show", func() bool {
		_, body, _ := get(t, b.base+"/metrics")
		return strings.Contains(body, `switchyard_plugin_calls_total{plugin="priority",slot="selection"}`) &&
			!strings.Contains(body, `switchyard_plugin_calls_total{plugin="priority",slot="selection"} 0`)
	})
	_, body, _ := get(t, b.base+"/metrics")
	for _, want := range []string{
		`switchyard_plugin_decision_seconds_bucket{plugin="fair-share",le="0.01"}`,
		`switchyard_plugin_faults_total{kind="deadline",plugin="fair-share"} 0`,
		`switchyard_plugin_faults_total{kind="fuel",plugin="fair-share"} 0`,
		`switchyard_plugin_fallbacks_total{cause="fault",plugin="priority"} 0`,
		`switchyard_plugin_fallbacks_total{cause="breaker",plugin="priority"} 0`,
		`switchyard_plugin_quarantines_total{plugin="exponential"} 0`,
		`switchyard_plugin_state{plugin="fair-share",state="active"} 1`,
		`switchyard_plugin_state{plugin="fair-share",state="quarantined"} 0`,
		`switchyard_plugin_log_dropped_total{plugin="fair-share"} 0`,
		`switchyard_plugin_dry_run_faults_total{plugin="fair-share"} 0`,
		`switchyard_plugin_deadline_graces_total{plugin="fair-share"} `, // its count depends on the machine's load
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, `plugin="native:`, "native policies have no plugin series")
}

// garbageFairness is a fairness plugin that decides well over 8 candidates
// or fewer (so that it passes its smoke decision at load) and answers 1,000
// picks over more: an invalid answer (plugins/host hostile_test.go builds it).
const garbageFairness = "0061736d01000000011d056000017f60017f017e60047e7e7f7f017f60037f7f7f0060017f017f0212010a73776974636879617264036c6f670003030504000102040503010002073004066d656d6f727902000b6162695f76657273696f6e0001056172656e6100020d666169726e6573735f7069636b00030a3104040041010b0b0042808084808080c0000b1902017e017f41888004280200410949044041000f0b41e8070b040020000b0b32010041000b2c706c7567696e207361797320001b5b33316d7265641b5b306d0d0a666f72676564206c696e65fffe20656e64"

// An invalid answer refused by the plugin host counts in
// stats.policyInvalid and in the engine_events_total series, like one the
// engine refuses itself.
func TestPolicyInvalidCountsThePluginHostsRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	ctx := ctxFor(t)
	wasm, err := hex.DecodeString(garbageFairness)
	require.NoError(t, err)
	require.NoError(t, b.c.Do(ctx, `mutation($w: String!) { loadPlugin(input: {name: "garbage", wasmBase64: $w}) { name } }`,
		map[string]any{"w": base64.StdEncoding.EncodeToString(wasm)}, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "garbage"}) { name } }`, nil, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "main", input: {paused: true}) { name } }`, nil, nil))
	for i := range 12 { // twelve queue heads: one decision over more than 8 candidates
		b.submit(t, fmt.Sprintf("agent-%d", i), nil)
	}
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "main", input: {paused: false}) { name } }`, nil, nil))
	waitfor.Eventually(t, "the refused answer is counted", func() bool {
		var res struct{ Stats struct{ PolicyInvalid int } }
		require.NoError(t, b.c.Do(ctx, `{ stats { policyInvalid } }`, nil, &res))
		return res.Stats.PolicyInvalid > 0
	})
	_, body, _ := get(t, b.base+"/metrics")
	require.NotContains(t, body, `switchyard_engine_events_total{kind="policy_invalid"} 0`)
	require.Contains(t, body, `switchyard_plugin_faults_total{kind="invalid",plugin="garbage"}`)
}
