package server_test

// The role × operation matrix: every query, mutation and subscription of the
// schema, tried with a token of each role, with the token of another agent
// and with none. What may run succeeds; what may not fails with its code
// (UNAUTHENTICATED, FORBIDDEN) and leaves the server's state exactly as it
// was. The expectations below are written out by hand, apart from the
// access table they check; an operation of the schema without one fails
// the test.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/pull"
	"github.com/switchyard/switchyard/schedule"
)

// The agents of the matrix: fixtures belong to ownerAgent; otherAgent's
// token must not reach them.
const (
	ownerAgent = "agent-a"
	otherAgent = "agent-b"
)

// caller is one identity of the matrix.
type caller struct {
	name  string // admin, operator, agent, other-agent, reader, no-token
	role  string // its role ("" without a token)
	agent string // for agent tokens
	token string
	c     *client.Client
}

// authBundle is a server with authentication on and a token per role.
type authBundle struct {
	*bundle
	callers []*caller
	admin   *caller
	seq     atomic.Int64
}

// tokenSpec is a token of a test server: its name, role, agent and lanes.
type tokenSpec struct {
	name, role, agent string
	lanes             []string
}

// withTokensLanes turns authentication on with the tokens.
func withTokensLanes(t *testing.T, specs ...tokenSpec) (func(*setupOptions), map[string]string) {
	t.Helper()
	var tokens []auth.Token
	secrets := map[string]string{}
	for _, s := range specs {
		tok, err := auth.NewToken()
		require.NoError(t, err)
		hash, err := auth.HashToken(tok)
		require.NoError(t, err)
		role, err := auth.ParseRole(s.role)
		require.NoError(t, err)
		tokens = append(tokens, auth.Token{Name: s.name, Hash: hash, Role: role, AgentID: s.agent, Lanes: s.lanes})
		secrets[s.name] = tok
	}
	authn, err := auth.NewAuthenticator(tokens)
	require.NoError(t, err)
	return func(o *setupOptions) {
		prev := o.server
		o.server = func(so *server.Options) {
			if prev != nil {
				prev(so)
			}
			so.Auth = authn
		}
	}, secrets
}

// withTokens turns authentication on with the tokens (name, role, agent).
func withTokens(t *testing.T, specs ...[3]string) (func(*setupOptions), map[string]string) {
	t.Helper()
	ts := make([]tokenSpec, len(specs))
	for i, s := range specs {
		ts[i] = tokenSpec{s[0], s[1], s[2], nil}
	}
	return withTokensLanes(t, ts...)
}

// clientWith returns a client of the bundle's endpoint sending token.
func (b *bundle) clientWith(token string) *client.Client {
	c := client.New(b.base + "/graphql")
	c.HTTP = &http.Client{Timeout: 30 * time.Second}
	if token != "" {
		c.Header.Set("Authorization", "Bearer "+token)
	}
	return c
}

func setupAuth(t *testing.T, opts ...func(*setupOptions)) *authBundle {
	t.Helper()
	tokens, secrets := withTokensLanes(t,
		tokenSpec{"root", "admin", "", nil}, tokenSpec{"ops", "operator", "", nil}, tokenSpec{"bot-a", "agent", ownerAgent, nil},
		tokenSpec{"bot-b", "agent", otherAgent, nil}, tokenSpec{"viewer", "reader", "", nil}, tokenSpec{"puller", "worker", "", []string{"pulls"}})
	lanes := engine.DefaultLanes()
	for i := range lanes {
		lanes[i].Paused = true // nothing dispatches by itself: the state holds still between snapshots
	}
	work := engine.DefaultLanes()[0]
	work.Name, work.Retry.MaxAttempts = "work", 1
	spare := engine.DefaultLanes()[0]
	spare.Name, spare.Paused = "spare", true
	pulls := engine.NewLane("pulls") // dispatches to nobody until a worker asks
	pulls.Pull = true
	base := func(o *setupOptions) {
		o.registry, o.plugins, o.schedules, o.pull, o.heartbeats = true, true, true, true, true
		o.config = engine.Config{Lanes: append(lanes, work, spare, pulls)}
		o.limits = resolvers.Limits{MutationsPerSecond: -1}
	}
	b := setup(t, append([]func(*setupOptions){base, tokens}, opts...)...)
	ab := &authBundle{bundle: b}
	for _, c := range []*caller{
		{name: "admin", role: "admin", token: secrets["root"]},
		{name: "operator", role: "operator", token: secrets["ops"]},
		{name: "agent", role: "agent", agent: ownerAgent, token: secrets["bot-a"]},
		{name: "other-agent", role: "agent", agent: otherAgent, token: secrets["bot-b"]},
		{name: "reader", role: "reader", token: secrets["viewer"]},
		{name: "worker", role: "worker", token: secrets["puller"]},
		{name: "no-token"},
	} {
		c.c = b.clientWith(c.token)
		ab.callers = append(ab.callers, c)
	}
	ab.admin = ab.callers[0]
	// A healthy instance, so that tasks of the unpaused lane are placed.
	fleet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","tabs":[]}`))
	}))
	t.Cleanup(fleet.Close)
	_, err := b.reg.Register(context.Background(), executor.InstanceConfig{ID: "fleet", URL: fleet.URL})
	require.NoError(t, err)
	waitfor.Eventually(t, "the instance is healthy", func() bool {
		in, ok := b.reg.Get(context.Background(), "fleet")
		return ok && in.Health == executor.HealthHealthy
	})
	return ab
}

// uniq returns a fresh name.
func (b *authBundle) uniq(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, b.seq.Add(1))
}

// Fixtures, made through the engine and its components directly (not the
// API under test), each fresh and owned by agent.

func (b *authBundle) queued(t *testing.T, agent string) string {
	t.Helper()
	tk, err := b.eng.Submit(context.Background(), engine.TaskSpec{AgentID: agent, Lane: "main", SessionKey: b.uniq("s"),
		Action: &engine.Action{Kind: "click", Selector: "css:#go"}})
	require.NoError(t, err)
	return tk.ID
}

func (b *authBundle) cancelled(t *testing.T, agent string) string {
	t.Helper()
	id := b.queued(t, agent)
	_, err := b.eng.Cancel(context.Background(), id, "fixture")
	require.NoError(t, err)
	return id
}

func (b *authBundle) parked(t *testing.T, agent string) string {
	t.Helper()
	tk, err := b.eng.Submit(context.Background(), engine.TaskSpec{AgentID: agent, Lane: "work", Action: &engine.Action{Kind: "click"}})
	require.NoError(t, err)
	waitfor.Eventually(t, "the task runs", func() bool { return b.exec.Run(tk.ID) != nil })
	require.NoError(t, b.exec.Fail(tk.ID, engine.Transientf("fixture")))
	waitfor.Eventually(t, "the task is parked", func() bool {
		got, err := b.eng.Task(context.Background(), tk.ID)
		return err == nil && got.State == engine.StateParked
	})
	return tk.ID
}

func (b *authBundle) batch(t *testing.T, agent string) string {
	t.Helper()
	res, err := b.eng.SubmitBatch(context.Background(), engine.BatchSpec{Items: []engine.BatchItem{
		{Spec: engine.TaskSpec{AgentID: agent, Lane: "main", Action: &engine.Action{Kind: "click"}}},
		{Spec: engine.TaskSpec{AgentID: agent, Lane: "main", Action: &engine.Action{Kind: "click"}}},
	}})
	require.NoError(t, err)
	return res.BatchID
}

func (b *authBundle) schedule(t *testing.T, agent string) string {
	t.Helper()
	s, err := b.sched.Create(context.Background(), schedule.Spec{Name: b.uniq("sched"), Kind: schedule.KindEvery, Every: time.Hour,
		Enabled: true, Template: engine.TaskSpec{AgentID: agent, Lane: "cron", Action: &engine.Action{Kind: "click"}}})
	require.NoError(t, err)
	return s.ID
}

// leased is a task of the pull lane, leased; it returns the lease id. Each
// is a fresh agent's (the leases that stay held would reach an agent's
// ceiling).
func (b *authBundle) leased(t *testing.T) string {
	t.Helper()
	_, err := b.eng.Submit(context.Background(), engine.TaskSpec{AgentID: b.uniq("pulling"), Lane: "pulls", Action: &engine.Action{Kind: "job"}})
	require.NoError(t, err)
	ls, err := b.pull.Lease(context.Background(), "pulls", 1, pull.MaxLeaseFor, 0, "fixture") // outlasts the test: nothing moves by itself
	require.NoError(t, err)
	require.Len(t, ls, 1)
	return ls[0].ID
}

func freshLease(t *testing.T, b *authBundle) map[string]any {
	return map[string]any{"id": b.leased(t)}
}

func (b *authBundle) check(t *testing.T) string {
	t.Helper()
	c, err := b.checks.Create(context.Background(), heartbeat.Spec{Name: b.uniq("hb"), URL: "http://127.0.0.1:1/", Interval: time.Hour})
	require.NoError(t, err)
	return c.ID
}

func (b *authBundle) instance(t *testing.T) string {
	t.Helper()
	in, err := b.reg.Register(context.Background(), executor.InstanceConfig{ID: b.uniq("inst"), URL: "http://127.0.0.1:1", Token: "instance-secret"})
	require.NoError(t, err)
	return in.ID
}

// ascWasm is a small WebAssembly policy (the AssemblyScript example).
func ascWasm(t *testing.T) []byte {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "..", "examples", "plugins", "asc.wasm"))
	require.NoError(t, err)
	return wasm
}

func (b *authBundle) plugin(t *testing.T) string {
	t.Helper()
	name := b.uniq("plug")
	_, err := b.plugins.Load(context.Background(), name, ascWasm(t), nil)
	require.NoError(t, err)
	return name
}

// snapshot is everything the API can change, as JSON: a refused operation
// must leave it byte for byte as it was.
func (b *authBundle) snapshot(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	st := b.eng.Stats(ctx)
	tasks, err := b.eng.Tasks(ctx, engine.TaskQuery{Limit: 1000})
	require.NoError(t, err)
	type taskView struct {
		ID, Agent string
		State     engine.State
		Attempts  int
	}
	var ts []taskView
	for _, tk := range tasks {
		ts = append(ts, taskView{tk.ID, tk.Spec.AgentID, tk.State, len(tk.Attempts)})
	}
	type laneView struct {
		Config           engine.LaneConfig
		Selection, Retry string
	}
	var lanes []laneView
	for _, l := range b.eng.Lanes(ctx) {
		lanes = append(lanes, laneView{l.Config, l.Selection, l.Retry})
	}
	type instView struct {
		ID, URL  string
		Kind     executor.Kind
		Capacity int
		Labels   map[string]string
		HasToken bool
	}
	var insts []instView
	for _, in := range b.reg.List(context.Background()) {
		insts = append(insts, instView{in.ID, in.URL, in.Kind, in.Capacity, in.Labels, in.HasToken})
	}
	type plugView struct {
		Name     string
		Config   string
		ActiveIn []string
		State    string
	}
	var plugs []plugView
	for _, p := range b.plugins.List(context.Background()) {
		plugs = append(plugs, plugView{p.Name, string(p.Config), p.ActiveIn, fmt.Sprint(p.Stats.Disabled)})
	}
	type schedView struct {
		ID       string
		Spec     schedule.Spec
		Runs     int
		LastTask string
	}
	var scheds []schedView
	for _, s := range b.sched.List(context.Background()) {
		scheds = append(scheds, schedView{s.ID, s.Spec, len(s.Runs), s.LastTask})
	}
	out, err := json.Marshal(map[string]any{
		"lastSeq": st.LastSeq, "submitted": st.Submitted, "draining": st.Draining, "tasks": ts, "lanes": lanes,
		"agents": b.eng.Config().Agents, "agentStatus": b.eng.Agents(ctx), "instances": insts, "plugins": plugs,
		"policies": b.eng.Policies(ctx), "schedules": scheds,
	})
	require.NoError(t, err)
	return string(out)
}

// opCase is what the matrix expects of one operation.
type opCase struct {
	// roles may run it ("admin operator agent reader").
	roles string
	// narrowed: an agent token runs it over its own work only, and the
	// other agent's token runs it too, touching and seeing nothing of the
	// owner's (listings, stopSession). Otherwise an operation that names the
	// owner's work (own) is FORBIDDEN to the other agent.
	own, narrowed bool
	query         string
	vars          func(t *testing.T, b *authBundle) map[string]any
	// check, when set, is asked about the data of a success.
	check func(t *testing.T, c *caller, data map[string]any)
}

func (oc opCase) allows(c *caller) bool {
	return c.role != "" && slices.Contains(strings.Fields(oc.roles), c.role)
}

func noVars(*testing.T, *authBundle) map[string]any { return nil }

// taskInput is a submission as agent.
func taskInput(agent string) map[string]any {
	return map[string]any{"agentId": agent, "lane": "main", "action": map[string]any{"kind": "click", "selector": "css:#go"}}
}

func scheduleInput(b *authBundle, agent string) map[string]any {
	return map[string]any{"name": b.uniq("sched"), "kind": "EVERY", "everyMs": 3_600_000, "template": taskInput(agent)}
}

func idVar(make func(t *testing.T, b *authBundle) string) func(t *testing.T, b *authBundle) map[string]any {
	return func(t *testing.T, b *authBundle) map[string]any { return map[string]any{"id": make(t, b)} }
}

func nameVar(make func(t *testing.T, b *authBundle) string) func(t *testing.T, b *authBundle) map[string]any {
	return func(t *testing.T, b *authBundle) map[string]any { return map[string]any{"name": make(t, b)} }
}

func ownQueued(t *testing.T, b *authBundle) string     { return b.queued(t, ownerAgent) }
func ownSchedule(t *testing.T, b *authBundle) string   { return b.schedule(t, ownerAgent) }
func freshInstance(t *testing.T, b *authBundle) string { return b.instance(t) }
func freshPlugin(t *testing.T, b *authBundle) string   { return b.plugin(t) }
func freshCheck(t *testing.T, b *authBundle) string    { return b.check(t) }

const (
	workers    = "admin operator worker"
	everyone   = "admin operator agent reader"
	submitters = "admin operator agent"
	operators  = "admin operator"
	admins     = "admin"
)

// matrix is the expectation of every operation of the schema, by
// "Type.field".
func matrix() map[string]opCase {
	return map[string]opCase{
		"Query.task":  {roles: everyone, own: true, query: `query($id: ID!) { task(id: $id) { id agentId } }`, vars: idVar(ownQueued)},
		"Query.tasks": {roles: everyone, narrowed: true, query: `{ tasks(first: 1000) { nodes { id agentId } totalCount } }`, vars: noVars},
		"Query.batch": {roles: everyone, own: true, query: `query($id: ID!) { batch(id: $id) { id total tasks { nodes { agentId } } } }`,
			vars: idVar(func(t *testing.T, b *authBundle) string { return b.batch(t, ownerAgent) })},
		"Query.lanes":           {roles: everyone, query: `{ lanes { name } }`, vars: noVars},
		"Query.lane":            {roles: everyone, query: `{ lane(name: "main") { name } }`, vars: noVars},
		"Query.agents":          {roles: everyone, narrowed: true, query: `{ agents { id agentId: id } }`, vars: noVars},
		"Query.stats":           {roles: everyone, query: `{ stats { submitted } }`, vars: noVars},
		"Query.plan":            {roles: everyone, narrowed: true, query: `{ plan(limit: 100) { steps { agentId } skipped { agentId } } }`, vars: noVars},
		"Query.policies":        {roles: everyone, query: `{ policies { name } }`, vars: noVars},
		"Query.plugins":         {roles: everyone, query: `{ plugins { name } }`, vars: noVars},
		"Query.plugin":          {roles: everyone, query: `{ plugin(name: "priority") { name } }`, vars: noVars},
		"Query.schedules":       {roles: everyone, narrowed: true, query: `{ schedules { id template { agentId } } }`, vars: noVars},
		"Query.schedule":        {roles: everyone, own: true, query: `query($id: ID!) { schedule(id: $id) { id template { agentId } } }`, vars: idVar(ownSchedule)},
		"Query.instances":       {roles: everyone, query: `{ instances { id url hasToken } }`, vars: noVars},
		"Query.instance":        {roles: everyone, query: `query($id: ID!) { instance(id: $id) { id } }`, vars: idVar(freshInstance)},
		"Query.server":          {roles: everyone, query: `{ server { version limits { mutationBurst } } }`, vars: noVars},
		"Query.nodes":           {roles: everyone, query: `{ nodes { id role leader healthy } }`, vars: noVars},
		"Query.heartbeatChecks": {roles: everyone, query: `{ heartbeatChecks { id } }`, vars: noVars},
		"Query.heartbeatCheck":  {roles: everyone, query: `query($id: ID!) { heartbeatCheck(id: $id) { id } }`, vars: idVar(freshCheck)},

		"Mutation.submitTask": {roles: submitters, own: true, query: `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id agentId } }`,
			vars: func(*testing.T, *authBundle) map[string]any { return map[string]any{"in": taskInput(ownerAgent)} }},
		"Mutation.submitTasks": {roles: submitters, own: true,
			query: `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId accepted items { error { code } } } }`,
			vars: func(*testing.T, *authBundle) map[string]any {
				return map[string]any{"in": map[string]any{"items": []any{map[string]any{"task": taskInput(ownerAgent)}}}}
			},
			check: func(t *testing.T, _ *caller, d map[string]any) {
				require.EqualValues(t, 1, d["submitTasks"].(map[string]any)["accepted"])
			}},
		"Mutation.cancelTask": {roles: submitters, own: true, query: `mutation($id: ID!) { cancelTask(id: $id) { id state } }`, vars: idVar(ownQueued)},
		"Mutation.cancelTasks": {roles: submitters, own: true, query: `mutation($f: TaskFilter!) { cancelTasks(filter: $f) { count } }`,
			vars: func(t *testing.T, b *authBundle) map[string]any {
				id := b.queued(t, ownerAgent)
				return map[string]any{"f": map[string]any{"agentId": ownerAgent, "ids": []string{id}}}
			},
			check: func(t *testing.T, _ *caller, d map[string]any) {
				require.EqualValues(t, 1, d["cancelTasks"].(map[string]any)["count"])
			}},
		"Mutation.stopSession": {roles: submitters, narrowed: true, query: `mutation($s: String!) { stopSession(sessionKey: $s, all: true) { count } }`,
			vars: func(t *testing.T, b *authBundle) map[string]any {
				id := b.queued(t, ownerAgent)
				tk, err := b.eng.Task(context.Background(), id)
				require.NoError(t, err)
				return map[string]any{"s": tk.Spec.SessionKey}
			},
			check: func(t *testing.T, c *caller, d map[string]any) {
				want := 1
				if c.name == "other-agent" {
					want = 0 // the session is the owner's: nothing of it is the other agent's to stop
				}
				require.EqualValues(t, want, d["stopSession"].(map[string]any)["count"])
			}},
		"Mutation.retryTask": {roles: submitters, own: true, query: `mutation($id: ID!) { retryTask(id: $id) { id retryOf } }`,
			vars: idVar(func(t *testing.T, b *authBundle) string { return b.cancelled(t, ownerAgent) })},
		"Mutation.resetTask": {roles: submitters, own: true, query: `mutation($id: ID!) { resetTask(id: $id) { id state } }`,
			vars: idVar(func(t *testing.T, b *authBundle) string { return b.parked(t, ownerAgent) })},
		"Mutation.createSchedule": {roles: submitters, own: true, query: `mutation($in: ScheduleInput!) { createSchedule(input: $in) { id } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any {
				return map[string]any{"in": scheduleInput(b, ownerAgent)}
			}},
		"Mutation.updateSchedule": {roles: submitters, own: true, query: `mutation($id: ID!, $in: ScheduleInput!) { updateSchedule(id: $id, input: $in) { id } }`,
			vars: func(t *testing.T, b *authBundle) map[string]any {
				return map[string]any{"id": ownSchedule(t, b), "in": scheduleInput(b, ownerAgent)}
			}},
		"Mutation.enableSchedule":  {roles: submitters, own: true, query: `mutation($id: ID!) { enableSchedule(id: $id) { id } }`, vars: idVar(ownSchedule)},
		"Mutation.disableSchedule": {roles: submitters, own: true, query: `mutation($id: ID!) { disableSchedule(id: $id) { id } }`, vars: idVar(ownSchedule)},
		"Mutation.triggerSchedule": {roles: submitters, own: true, query: `mutation($id: ID!) { triggerSchedule(id: $id) { taskId outcome } }`, vars: idVar(ownSchedule)},
		"Mutation.deleteSchedule":  {roles: submitters, own: true, query: `mutation($id: ID!) { deleteSchedule(id: $id) { id } }`, vars: idVar(ownSchedule)},
		"Mutation.updateLane": {roles: operators, query: `mutation($n: Int!) { updateLane(name: "spare", input: {maxQueued: $n}) { name } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any { return map[string]any{"n": 1000 + b.seq.Add(1)} }},
		"Mutation.createLane": {roles: operators, query: `mutation($n: String!) { createLane(name: $n, input: {maxInFlight: 2}) { name } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any { return map[string]any{"n": b.uniq("made")} }},
		"Mutation.deleteLane": {roles: operators, query: `mutation($n: String!) { deleteLane(name: $n) { name } }`,
			vars: func(t *testing.T, b *authBundle) map[string]any {
				n := b.uniq("gone")
				_, err := b.eng.CreateLane(context.Background(), n, engine.LaneUpdate{})
				require.NoError(t, err)
				return map[string]any{"n": n}
			}},
		"Mutation.setAgent": {roles: operators, query: `mutation($w: Int!) { setAgent(id: "tuned", input: {weight: $w}) { id } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any { return map[string]any{"w": 1 + b.seq.Add(1)} }},
		"Mutation.drain": {roles: operators, query: `mutation { drain { submitted } }`, vars: noVars},
		"Mutation.registerInstance": {roles: operators, query: `mutation($id: ID!) { registerInstance(input: {id: $id, url: "http://127.0.0.1:1", token: "t0ken"}) { id hasToken } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any { return map[string]any{"id": b.uniq("inst")} }},
		"Mutation.updateInstance":  {roles: operators, query: `mutation($id: ID!) { updateInstance(id: $id, input: {capacity: 3}) { id } }`, vars: idVar(freshInstance)},
		"Mutation.removeInstance":  {roles: operators, query: `mutation($id: ID!) { removeInstance(id: $id) { id } }`, vars: idVar(freshInstance)},
		"Mutation.configurePlugin": {roles: operators, query: `mutation($name: String!) { configurePlugin(name: $name, config: {}) { name } }`, vars: nameVar(freshPlugin)},
		"Mutation.enablePlugin":    {roles: operators, query: `mutation($name: String!) { enablePlugin(name: $name) { name } }`, vars: nameVar(freshPlugin)},
		"Mutation.setPolicy": {roles: operators, query: `mutation($name: String) { setPolicy(input: {slot: SELECTION, lane: "spare", name: $name}) { name } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any {
				if b.seq.Add(1)%2 == 0 {
					return map[string]any{"name": "native:priority"}
				}
				return map[string]any{"name": "priority"}
			}},
		"Mutation.createHeartbeatCheck": {roles: operators, query: `mutation($n: String!) { createHeartbeatCheck(input: {name: $n, url: "http://127.0.0.1:1/", enabled: false}) { id } }`,
			vars: func(_ *testing.T, b *authBundle) map[string]any { return map[string]any{"n": b.uniq("hb")} }},
		"Mutation.updateHeartbeatCheck": {roles: operators, query: `mutation($id: ID!) { updateHeartbeatCheck(id: $id, input: {name: "renamed", url: "http://127.0.0.1:1/", enabled: false}) { id } }`,
			vars: idVar(freshCheck)},
		"Mutation.deleteHeartbeatCheck": {roles: operators, query: `mutation($id: ID!) { deleteHeartbeatCheck(id: $id) { id } }`, vars: idVar(freshCheck)},
		"Mutation.probeHeartbeatCheck":  {roles: operators, query: `mutation($id: ID!) { probeHeartbeatCheck(id: $id) { id state } }`, vars: idVar(freshCheck)},
		"Mutation.loadPlugin": {roles: admins, query: `mutation($name: String!, $wasm: String!) { loadPlugin(input: {name: $name, wasmBase64: $wasm}) { name } }`,
			vars: func(t *testing.T, b *authBundle) map[string]any {
				return map[string]any{"name": b.uniq("up"), "wasm": base64.StdEncoding.EncodeToString(ascWasm(t))}
			}},
		"Mutation.unloadPlugin": {roles: admins, query: `mutation($name: String!) { unloadPlugin(name: $name) { name } }`, vars: nameVar(freshPlugin)},

		"Mutation.leaseTasks": {roles: workers, query: `mutation { leaseTasks(lane: "pulls", max: 1, leaseForMs: 86400000) { leaseId task { id } } }`,
			vars: func(t *testing.T, b *authBundle) map[string]any {
				_, err := b.eng.Submit(context.Background(), engine.TaskSpec{AgentID: b.uniq("pulling"), Lane: "pulls", Action: &engine.Action{Kind: "job"}})
				require.NoError(t, err)
				return nil
			},
			check: func(t *testing.T, _ *caller, d map[string]any) { require.Len(t, d["leaseTasks"], 1) }},
		"Mutation.renewLease":   {roles: workers, query: `mutation($id: ID!) { renewLease(leaseId: $id, leaseForMs: 86400000) { leaseId } }`, vars: freshLease},
		"Mutation.completeTask": {roles: workers, query: `mutation($id: ID!) { completeTask(leaseId: $id, result: 1) { task { state } } }`, vars: freshLease},
		"Mutation.failTask":     {roles: workers, query: `mutation($id: ID!) { failTask(leaseId: $id, error: "no", retryable: false) { task { state } } }`, vars: freshLease},
		"Mutation.releaseTask":  {roles: workers, query: `mutation($id: ID!) { releaseTask(leaseId: $id) { task { state } } }`, vars: freshLease},

		"Subscription.taskEvents":      {roles: everyone, narrowed: true, query: `subscription { taskEvents(after: 0) { seq taskId agentId } }`, vars: noVars},
		"Subscription.taskEventFeed":   {roles: everyone, narrowed: true, query: `subscription { taskEventFeed(after: 0, maxDelayMs: 0) { events count } }`, vars: noVars},
		"Subscription.task":            {roles: everyone, own: true, query: `subscription($id: ID!) { task(id: $id) { id agentId } }`, vars: idVar(ownQueued)},
		"Subscription.stats":           {roles: everyone, query: `subscription { stats(intervalMs: 100) { submitted } }`, vars: noVars},
		"Subscription.instanceEvents":  {roles: everyone, query: `subscription { instanceEvents { kind instance { id hasToken } } }`, vars: noVars},
		"Subscription.pluginEvents":    {roles: everyone, query: `subscription { pluginEvents { kind plugin } }`, vars: noVars},
		"Subscription.heartbeatEvents": {roles: everyone, query: `subscription { heartbeatEvents { seq checkId } }`, vars: noVars},
	}
}

// rootOperations lists every operation of the schema as "Type.field",
// mutations that end the run (drain) last.
func rootOperations(b *bundle) []string {
	s := b.srv.Resolver().ExecutableSchema().Schema()
	var ops []string
	for _, root := range []string{"Query", "Mutation", "Subscription"} {
		def := s.Types[root]
		for _, f := range def.Fields {
			if !strings.HasPrefix(f.Name, "__") {
				ops = append(ops, root+"."+f.Name)
			}
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[j] == "Mutation.drain" && ops[i] != ops[j] })
	return ops
}

// agentIDs collects every "agentId" value in a response's data.
func agentIDs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "agentId" {
				if s, ok := e.(string); ok {
					*out = append(*out, s)
				}
			}
			agentIDs(e, out)
		}
	case []any:
		for _, e := range x {
			agentIDs(e, out)
		}
	}
}

func TestEveryOperationIsAllowedOrRefusedByRoleAndChangesNothingWhenRefused(t *testing.T) {
	t.Parallel()
	b := setupAuth(t)
	// Work of the other agent exists too, so that what it may list is not
	// empty by chance.
	b.queued(t, otherAgent)
	b.schedule(t, otherAgent)

	cases := matrix()
	ops := rootOperations(b.bundle)
	var missing []string
	for _, op := range ops {
		if _, ok := cases[op]; !ok {
			missing = append(missing, op)
		}
	}
	require.Empty(t, missing, "operations of the schema without an expectation in the matrix: add them to matrix()")
	for op := range cases {
		require.Contains(t, ops, op, "the matrix expects an operation the schema does not have")
	}

	tried := 0
	for _, op := range ops {
		oc := cases[op]
		for _, c := range b.callers {
			if strings.HasPrefix(op, "Subscription.") {
				b.trySubscription(t, op, oc, c)
			} else {
				b.tryOperation(t, op, oc, c)
			}
			tried++
		}
	}
	require.Equal(t, len(ops)*len(b.callers), tried)
}

// expectation says what c should get from an operation: "" (success),
// narrowed success, or an error code.
func (oc opCase) expectation(c *caller) (code string, narrowed bool) {
	switch {
	case c.role == "":
		return auth.CodeUnauthenticated, false
	case !oc.allows(c):
		return auth.CodeForbidden, false
	case c.agent == otherAgent && oc.narrowed:
		return "", true
	case c.agent == otherAgent && oc.own:
		return auth.CodeForbidden, false
	}
	return "", c.agent != ""
}

func (b *authBundle) tryOperation(t *testing.T, op string, oc opCase, c *caller) {
	t.Helper()
	vars := oc.vars(t, b)
	before := b.snapshot(t)
	res, status, err := c.c.Raw(ctxFor(t), client.Request{Query: oc.query, Variables: vars})
	want, narrowed := oc.expectation(c)
	what := fmt.Sprintf("%s as %s", op, c.name)
	if want == auth.CodeUnauthenticated {
		require.Equal(t, http.StatusUnauthorized, status, what)
		var se *client.StatusError
		if errors.As(err, &se) {
			t.Fatalf("%s: want a GraphQL error with 401, got %v", what, err)
		}
	}
	require.NoError(t, err, what)
	if want != "" {
		require.NotEmpty(t, res.Errors, "%s: want %s, got %s", what, want, res.Data)
		require.Equal(t, want, res.Errors[0].Code(), "%s: %s", what, res.Errors[0].Message)
		if want == auth.CodeForbidden {
			// One status for FORBIDDEN, whether the access table refused
			// (before anything runs) or a row-level check did.
			require.Equal(t, http.StatusForbidden, status, "%s: refused: 403", what)
			require.Contains(t, []string{"", "null"}, string(res.Data), "%s: refused in full: no data", what)
		}
		require.Equal(t, before, b.snapshot(t), "%s was refused and must change nothing", what)
		return
	}
	require.Empty(t, res.Errors, "%s must succeed", what)
	require.Equal(t, http.StatusOK, status, what)
	var data map[string]any
	require.NoError(t, json.Unmarshal(res.Data, &data))
	for _, v := range data {
		require.NotNil(t, v, "%s answered null", what)
	}
	if c.agent != "" {
		var agents []string
		agentIDs(data, &agents)
		for _, a := range agents {
			require.Equal(t, c.agent, a, "%s: an agent token sees its own agent's work only", what)
		}
	}
	if narrowed && c.agent == otherAgent && strings.HasPrefix(op, "Mutation.") {
		require.Equal(t, before, b.snapshot(t), "%s touches nothing of the owner's", what)
	}
	if oc.check != nil {
		oc.check(t, c, data)
	}
}

// trigger makes something happen that a subscription of op reports.
func (b *authBundle) trigger(t *testing.T, op string, c *caller) {
	t.Helper()
	switch op {
	case "Subscription.instanceEvents":
		b.instance(t)
	case "Subscription.heartbeatEvents":
		_, err := b.checks.Probe(context.Background(), b.check(t)) // nobody listens: UNKNOWN → DOWN
		require.NoError(t, err)
	case "Subscription.pluginEvents":
		name := "priority"
		if b.seq.Add(1)%2 == 0 {
			name = "native:priority"
		}
		require.NoError(t, b.plugins.SetPolicy(context.Background(), policy.SlotSelection, "spare", name))
	case "Subscription.taskEvents", "Subscription.taskEventFeed":
		agent := c.agent
		if agent == "" {
			agent = ownerAgent
		}
		b.queued(t, agent)
	}
}

func (b *authBundle) trySubscription(t *testing.T, op string, oc opCase, c *caller) {
	t.Helper()
	ctx := ctxFor(t)
	what := fmt.Sprintf("%s as %s", op, c.name)
	want, _ := oc.expectation(c)
	if want == auth.CodeUnauthenticated {
		_, err := c.c.Dial(ctx, client.DialOptions{})
		require.Error(t, err, what)
		return // the close code is checked by TestAWebSocketWithoutAValidTokenIsClosedWith4403
	}
	conn, err := c.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err, what)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, oc.query, oc.vars(t, b))
	require.NoError(t, err, what)
	if want != "" {
		require.Equal(t, want, subscriptionError(t, ctx, sub).Code(), what)
		return
	}
	// Trigger events until the first message arrives.
	got := make(chan client.Message, 1)
	errc := make(chan error, 1)
	go func() {
		m, err := sub.Next(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- m
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-got:
			require.Empty(t, m.Errors, what)
			var data map[string]any
			require.NoError(t, json.Unmarshal(m.Data, &data), what)
			if c.agent != "" {
				var agents []string
				agentIDs(data, &agents)
				if f, ok := data["taskEventFeed"].(map[string]any); ok {
					var evs []any
					require.NoError(t, json.Unmarshal([]byte(mustJSON(t, f["events"])), &evs))
					agentIDs(evs, &agents)
					require.NotEmpty(t, evs, what)
				}
				for _, a := range agents {
					require.Equal(t, c.agent, a, "%s: an agent follows its own agent's work only", what)
				}
			}
			return
		case err := <-errc:
			t.Fatalf("%s: %v", what, err)
		case <-tick.C:
			b.trigger(t, op, c)
		case <-ctx.Done():
			t.Fatalf("%s: no message", what)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	switch x := v.(type) {
	case string:
		return x
	}
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

func TestAWebSocketWithoutAValidTokenIsClosedWith4403(t *testing.T) {
	t.Parallel()
	b := setupAuth(t)
	good := b.callers[0].token
	for _, proto := range []string{client.TransportWS, client.LegacyWS} {
		for name, payload := range map[string]map[string]any{
			"no token":        {},
			"a wrong token":   {"Authorization": "Bearer swy_not-a-token-of-this-server-at-all-000"},
			"a wrong scheme":  {"Authorization": "Basic " + good},
			"under headers":   {"headers": map[string]any{"Authorization": "Bearer nope-nope-nope-nope-nope-nope-nope"}},
			"a non-string":    {"Authorization": 42},
			"the right token": {"Authorization": "Bearer " + good},
			"right, headers":  {"headers": map[string]any{"authorization": "Bearer " + good}},
		} {
			t.Run(proto+"/"+name, func(t *testing.T) {
				ctx := ctxFor(t)
				ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.base, "http")+"/graphql",
					&websocket.DialOptions{Subprotocols: []string{proto}})
				require.NoError(t, err)
				defer ws.CloseNow()
				init, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": payload})
				require.NoError(t, ws.Write(ctx, websocket.MessageText, init))
				for {
					_, msg, err := ws.Read(ctx)
					if strings.HasPrefix(name, "right") || name == "the right token" {
						require.NoError(t, err)
						require.Contains(t, string(msg), "connection_ack")
						return
					}
					if err != nil {
						require.Equal(t, websocket.StatusCode(server.CloseForbidden), websocket.CloseStatus(err), "closed with 4403: %v", err)
						return
					}
					// graphql-ws says why first, in a connection_error.
					require.Contains(t, string(msg), "connection_error")
					require.NotContains(t, string(msg), good)
				}
			})
		}
	}
}

func TestARowLevelRefusalIs403LikeAnAccessTableOneUnlessPartOfTheOperationWasAllowed(t *testing.T) {
	t.Parallel()
	b := setupAuth(t)
	other := b.callers[3]
	require.Equal(t, otherAgent, other.agent)
	owners, mine := b.queued(t, ownerAgent), b.queued(t, otherAgent)

	// Refused in full by a row-level check: 403, no data.
	res, status, err := other.c.Raw(ctxFor(t), client.Request{Query: `query($id: ID!) { task(id: $id) { id } }`, Variables: map[string]any{"id": owners}})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "null", string(res.Data))
	require.Equal(t, auth.CodeForbidden, res.Errors[0].Code())

	// Refused by the access table: the same.
	res, status, err = other.c.Raw(ctxFor(t), client.Request{Query: `mutation { drain { submitted } }`})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, auth.CodeForbidden, res.Errors[0].Code())

	// A part allowed: 200 with that part, and the refusal of the rest.
	res, status, err = other.c.Raw(ctxFor(t), client.Request{Query: `query($a: ID!, $b: ID!) { mine: task(id: $a) { id } theirs: task(id: $b) { id } }`,
		Variables: map[string]any{"a": mine, "b": owners}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(res.Data), mine)
	require.Equal(t, auth.CodeForbidden, res.Errors[0].Code())
}

// A worker reads the task it leased and what the work needs, never another
// agent's task outside its lanes: not through the leased task's children,
// not through its dependencies (an agent token sees a foreign dependency's
// id only; so does a worker), whatever nested fields it asks for.
func TestAWorkerReadsNoOtherAgentsTaskOutsideItsLanesThroughALease(t *testing.T) {
	t.Parallel()
	b := setupAuth(t)
	ctx := context.Background()
	succeeded := func(agent string) string {
		tk, err := b.eng.Submit(ctx, engine.TaskSpec{AgentID: agent, Lane: "work", Labels: map[string]string{"secret": "label"},
			Action: &engine.Action{Kind: "navigate", Params: json.RawMessage(`{"url":"https://secret.example/` + agent + `"}`)}})
		require.NoError(t, err)
		waitfor.Eventually(t, "the dependency runs", func() bool { return b.exec.Run(tk.ID) != nil })
		require.NoError(t, b.exec.Succeed(tk.ID, `{"secret":"result"}`))
		waitfor.Eventually(t, "the dependency succeeds", func() bool {
			got, err := b.eng.Task(ctx, tk.ID)
			return err == nil && got.State == engine.StateSucceeded
		})
		return tk.ID
	}
	foreign, own := succeeded(otherAgent), succeeded(ownerAgent)
	job, err := b.eng.Submit(ctx, engine.TaskSpec{AgentID: ownerAgent, Lane: "pulls", DependsOn: []string{foreign, own}, Action: &engine.Action{Kind: "job"}})
	require.NoError(t, err)
	child, err := b.eng.Submit(ctx, engine.TaskSpec{AgentID: otherAgent, Lane: "main", ParentID: job.ID, Labels: map[string]string{"secret": "label"},
		Action: &engine.Action{Kind: "navigate", Params: json.RawMessage(`{"url":"https://secret.example/child"}`)}})
	require.NoError(t, err)

	const taskFields = `{ id agentId lane labels { key value } action { kind params } result attempts { tabId }
	  children { id agentId lane labels { key value } action { params } result attempts { tabId } }
	  dependencies { id state result } }`
	var worker *caller
	for _, c := range b.callers {
		if c.role == "worker" {
			worker = c
		}
	}
	var out struct {
		LeaseTasks []struct {
			LeaseID string
			Task    json.RawMessage
		}
	}
	require.NoError(t, worker.c.Do(ctxFor(t), `mutation { leaseTasks(lane: "pulls", max: 1, leaseForMs: 86400000) { leaseId task `+taskFields+` } }`, nil, &out))
	require.Len(t, out.LeaseTasks, 1)
	type deps struct {
		ID     string
		State  *string
		Result json.RawMessage
	}
	var got struct {
		ID           string
		Children     []json.RawMessage
		Dependencies []deps
	}
	require.NoError(t, json.Unmarshal(out.LeaseTasks[0].Task, &got))
	require.Equal(t, job.ID, got.ID)
	require.Empty(t, got.Children, "another agent's child in a lane the worker does not work")
	require.Len(t, got.Dependencies, 2)
	require.Equal(t, deps{ID: foreign, Result: json.RawMessage("null")}, got.Dependencies[0], "another agent's dependency: its id only")
	require.Equal(t, own, got.Dependencies[1].ID)
	require.Equal(t, "SUCCEEDED", *got.Dependencies[1].State, "the leased task's own agent's dependency is the work's input")
	require.JSONEq(t, `{"secret":"result"}`, string(got.Dependencies[1].Result))
	require.NotContains(t, string(out.LeaseTasks[0].Task), child.ID)
	require.NotContains(t, string(out.LeaseTasks[0].Task), otherAgent)

	// The same fields through the calls that answer with the task.
	var renewed struct {
		RenewLease struct{ Task json.RawMessage }
	}
	require.NoError(t, worker.c.Do(ctxFor(t), `mutation($id: ID!) { renewLease(leaseId: $id, leaseForMs: 86400000) { task `+taskFields+` } }`,
		map[string]any{"id": out.LeaseTasks[0].LeaseID}, &renewed))
	require.NotContains(t, string(renewed.RenewLease.Task), child.ID)
	require.NotContains(t, string(renewed.RenewLease.Task), otherAgent)
	var ended struct {
		CompleteTask struct{ Task json.RawMessage }
	}
	require.NoError(t, worker.c.Do(ctxFor(t), `mutation($id: ID!) { completeTask(leaseId: $id, result: 1) { task `+taskFields+` } }`,
		map[string]any{"id": out.LeaseTasks[0].LeaseID}, &ended))
	require.NotContains(t, string(ended.CompleteTask.Task), child.ID)
	require.NotContains(t, string(ended.CompleteTask.Task), otherAgent)

	// The fixture is what it claims: an admin sees the child and the result.
	var full struct{ Task json.RawMessage }
	require.NoError(t, b.admin.c.Do(ctxFor(t), `query($id: ID!) { task(id: $id) `+taskFields+` }`, map[string]any{"id": job.ID}, &full))
	require.Contains(t, string(full.Task), child.ID)
	require.Contains(t, string(full.Task), `"secret":"result"`)
}
