package server_test

// The edge's promises beyond the role matrix: 401 without a token on every
// protected path and transport, 403 and 429 for refused operations, the
// mutation rate limit, WebSocket origins, introspection off, the Host check
// without authentication, the subscription cap, and secrets that never come
// back.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/builtin"
)

func TestEveryProtectedPathNeedsAValidTokenAndSays401(t *testing.T) {
	t.Parallel()
	tokens, secrets := withTokens(t, [3]string{"viewer", "reader", ""}, [3]string{"bot", "agent", "a"})
	b := setup(t, tokens)
	anon := b.clientWith("")
	bad := b.clientWith("swy_" + strings.Repeat("x", 43))
	reader := b.clientWith(secrets["viewer"])
	ctx := ctxFor(t)
	for _, c := range []*client.Client{anon, bad} {
		res, status, err := c.Raw(ctx, client.Request{Query: `{ stats { submitted } }`})
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, status)
		require.Equal(t, "UNAUTHENTICATED", res.Errors[0].Code())
		err = c.Get(ctx, `{ stats { submitted } }`, nil, nil)
		var errs client.Errors
		require.ErrorAs(t, err, &errs, "GET too")
		require.Equal(t, "UNAUTHENTICATED", errs[0].Code())
		_, err = c.SubscribeSSE(ctx, `subscription { stats { submitted } }`, nil)
		var se *client.StatusError
		require.ErrorAs(t, err, &se, "SSE too")
		require.Equal(t, http.StatusUnauthorized, se.Status)
	}
	status, _, h := get(t, b.base+"/metrics")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, `Bearer realm="switchyard"`, h.Get("WWW-Authenticate"))
	status, _, _ = get(t, b.base+"/artifacts/x")
	require.Equal(t, http.StatusUnauthorized, status)

	require.NoError(t, reader.Do(ctx, `{ stats { submitted } }`, nil, nil))
	stream, err := reader.SubscribeSSE(ctx, `subscription { stats(intervalMs: 100) { submitted } }`, nil)
	require.NoError(t, err)
	_, err = stream.Next()
	require.NoError(t, err)
	stream.Close()
	status, _, _ = get(t, b.base+"/metrics", "Authorization", "Bearer "+secrets["viewer"])
	require.Equal(t, http.StatusOK, status)
	for _, open := range []string{"/healthz", "/readyz", "/", "/tour/sign-in"} {
		status, _, _ := get(t, b.base+open)
		require.Equal(t, http.StatusOK, status, "%s needs no token", open)
	}
}

// The playground and the dashboard are open pages, but a server with tokens
// tells them so: their token field is shown as needed, not found out from
// a 401 on every query.
func TestThePagesSayATokenIsNeededWhenTheServerHasTokens(t *testing.T) {
	t.Parallel()
	config := regexp.MustCompile(`"authRequired":(true|false)`)
	tokens, _ := withTokens(t, [3]string{"viewer", "reader", ""})
	for name, b := range map[string]*bundle{"with tokens": setup(t, tokens), "without": setup(t)} {
		for _, page := range []string{"/", "/dashboard/"} {
			status, body, _ := get(t, b.base+page)
			require.Equal(t, http.StatusOK, status, "%s %s", name, page)
			m := config.FindStringSubmatch(body)
			require.NotNil(t, m, "%s %s embeds authRequired", name, page)
			require.Equal(t, strconv.FormatBool(name == "with tokens"), m[1], "%s %s", name, page)
		}
	}
}

func TestAnAgentReadsTheArtifactsOfItsOwnTasksOnly(t *testing.T) {
	t.Parallel()
	tokens, secrets := withTokens(t, [3]string{"bot", "agent", "a"}, [3]string{"viewer", "reader", ""})
	b := setup(t, tokens)
	ctx := context.Background()
	mine := submitDirect(t, b, "a")
	theirs := submitDirect(t, b, "b")
	am, err := b.artifacts.Put(ctx, "text/plain", mine, []byte("mine"))
	require.NoError(t, err)
	at, err := b.artifacts.Put(ctx, "text/plain", theirs, []byte("theirs"))
	require.NoError(t, err)
	status, body, _ := get(t, b.base+"/artifacts/"+am.ID, "Authorization", "Bearer "+secrets["bot"])
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "mine", body)
	status, _, _ = get(t, b.base+"/artifacts/"+at.ID, "Authorization", "Bearer "+secrets["bot"])
	require.Equal(t, http.StatusNotFound, status, "another agent's artifact is not there for it")
	status, _, _ = get(t, b.base+"/artifacts/"+at.ID, "Authorization", "Bearer "+secrets["viewer"])
	require.Equal(t, http.StatusOK, status, "a reader reads every artifact")
}

// submitDirect submits a task through the engine and returns its id.
func submitDirect(t *testing.T, b *bundle, agent string) string {
	t.Helper()
	ab := &authBundle{bundle: b}
	return ab.queued(t, agent)
}

func TestMutationsAreRateLimitedPerTokenWith429AndRetryAfter(t *testing.T) {
	t.Parallel()
	tokens, secrets := withTokens(t, [3]string{"bot", "agent", "a"}, [3]string{"bot2", "agent", "b"})
	// A token every 10 s: the bucket stays empty for the whole test, however
	// slowly a loaded machine runs it.
	b := setup(t, tokens, func(o *setupOptions) { o.limits = resolvers.Limits{MutationsPerSecond: 0.1, MutationBurst: 2} })
	bot, bot2 := b.clientWith(secrets["bot"]), b.clientWith(secrets["bot2"])
	ctx := ctxFor(t)
	submit := `mutation { submitTask(input: {agentId: "a", action: {kind: "click"}}) { id } }`
	start := time.Now()
	for i := 0; i < 2; i++ {
		require.NoError(t, bot.Do(ctx, submit, nil, nil), "the burst passes")
	}
	before := b.eng.Stats(ctx).Submitted
	res, status, err := bot.Raw(ctx, client.Request{Query: submit})
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, status)
	e := res.Errors[0]
	require.Equal(t, "RATE_LIMITED", e.Code())
	require.Equal(t, true, e.Extensions["retryable"])
	// The bucket has refilled since the burst began, at most for as long as
	// the test has run since then.
	wait, elapsed := e.Extensions["retryAfterMs"].(float64), float64(time.Since(start).Milliseconds())
	require.LessOrEqual(t, wait, 10000.0+1, "a token every 10 s: the next one in at most 10 s")
	require.GreaterOrEqual(t, wait, 10000-elapsed-1, "and no sooner than the refill since the burst allows")
	require.Equal(t, before, b.eng.Stats(ctx).Submitted, "a limited mutation runs nothing")

	// The header says so too, in seconds (and queries are not limited).
	req, _ := http.NewRequest(http.MethodPost, b.base+"/graphql", strings.NewReader(`{"query":"mutation { drain { draining } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secrets["bot"])
	hres, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	hres.Body.Close()
	// drain is forbidden to agents: the role check comes first (403).
	require.Equal(t, http.StatusForbidden, hres.StatusCode)
	req, _ = http.NewRequest(http.MethodPost, b.base+"/graphql", strings.NewReader(`{"query":"`+strings.ReplaceAll(submit, `"`, `\"`)+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secrets["bot"])
	hres, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	hres.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, hres.StatusCode)
	secs, err := strconv.Atoi(hres.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.LessOrEqual(t, secs, 10, "whole seconds, rounded up")
	require.GreaterOrEqual(t, float64(secs), 10-time.Since(start).Seconds()-1)
	require.NoError(t, bot.Do(ctx, `{ stats { submitted } }`, nil, nil), "queries are not rate limited")

	// Each token has its own bucket; more mutations than a burst in one
	// operation can never pass.
	require.NoError(t, bot2.Do(ctx, `mutation { submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } }`, nil, nil))
	three := `mutation { a: submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } b: submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } c: submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } }`
	err = bot2.Do(ctx, three, nil, nil)
	var errs client.Errors
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "LIMIT", errs[0].Code())

	// Over a WebSocket the same error comes back as the operation's.
	conn, err := bot.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, submit, nil)
	require.NoError(t, err)
	require.Equal(t, "RATE_LIMITED", subscriptionError(t, ctx, sub).Code())
}

func TestWithoutTokensMutationsAreRateLimitedAsOneCaller(t *testing.T) {
	t.Parallel()
	// No tokens: every request is the anonymous caller, with one bucket. A
	// token every 10 s, as above.
	b := setup(t, func(o *setupOptions) { o.limits = resolvers.Limits{MutationsPerSecond: 0.1, MutationBurst: 2} })
	ctx := ctxFor(t)
	submit := `mutation { submitTask(input: {agentId: "a", action: {kind: "click"}}) { id } }`
	for i := 0; i < 2; i++ {
		require.NoError(t, b.c.Do(ctx, submit, nil, nil), "the burst passes")
	}
	res, status, err := b.c.Raw(ctx, client.Request{Query: submit})
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "RATE_LIMITED", res.Errors[0].Code())
	require.Contains(t, res.Errors[0].Message, "anonymous callers")
	three := `mutation { a: submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } b: submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } c: submitTask(input: {agentId: "b", action: {kind: "click"}}) { id } }`
	var errs client.Errors
	require.ErrorAs(t, b.c.Do(ctx, three, nil, nil), &errs)
	require.Equal(t, "LIMIT", errs[0].Code(), "more mutations than a burst in one operation never pass")
	require.Equal(t, uint64(2), b.eng.Stats(ctx).Submitted)
}

func TestWithoutTokensTheDefaultLimitsHold(t *testing.T) {
	t.Parallel()
	b := setup(t) // no tokens, the default limits: a burst of 200
	ctx := ctxFor(t)
	var q strings.Builder
	q.WriteString("mutation {")
	for i := range 201 {
		fmt.Fprintf(&q, ` s%d: submitTask(input: {agentId: "a", action: {kind: "click"}}) { id }`, i)
	}
	q.WriteString(" }")
	var errs client.Errors
	require.ErrorAs(t, b.c.Do(ctx, q.String(), nil, nil), &errs)
	require.Equal(t, "LIMIT", errs[0].Code())
	require.Contains(t, errs[0].Message, "at most 200 mutations")
	require.Zero(t, b.eng.Stats(ctx).Submitted)
}

func TestWebSocketsAreOpenedFromTheServersOwnOriginOrAnAllowedOne(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.server = func(so *server.Options) { so.AllowedOrigins = []string{"*.example.com", "https://tools.example.org"} }
	})
	host := strings.TrimPrefix(b.base, "http://")
	for origin, ok := range map[string]bool{
		"":                          true, // not a browser
		"http://" + host:            true,
		"http://evil.example.net":   false,
		"https://dash.example.com":  true,
		"https://tools.example.org": true,
		"http://tools.example.org":  false, // the pattern names the scheme
		"null":                      false,
	} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ws, res, err := websocket.Dial(ctxFor(t), "ws://"+host+"/graphql", &websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{client.TransportWS}})
		if ok {
			require.NoError(t, err, origin)
			ws.CloseNow()
			continue
		}
		require.Error(t, err, origin)
		require.Equal(t, http.StatusForbidden, res.StatusCode, origin)
	}
}

func TestIntrospectionCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	on := setup(t)
	off := setup(t, func(o *setupOptions) { o.server = func(so *server.Options) { so.DisableIntrospection = true } })
	q := `{ __schema { queryType { name } } }`
	require.NoError(t, on.c.Do(ctxFor(t), q, nil, nil))
	for _, q := range []string{q, `{ __type(name: "Task") { name } }`, `query { ...F } fragment F on Query { __schema { types { name } } }`} {
		res, status, err := off.c.Raw(ctxFor(t), client.Request{Query: q})
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, status, q)
		require.Nil(t, res.Data, "nothing ran")
		require.Equal(t, "FORBIDDEN", res.Errors[0].Code(), q)
		require.Contains(t, res.Errors[0].Message, "introspection is turned off")
	}
	// Validation errors name no field that exists: nothing about the
	// schema leaks through suggestions.
	err := off.c.Do(ctxFor(t), `{ task { id } tasksx { totalCount } }`, nil, nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "Did you mean")
	err = on.c.Do(ctxFor(t), `{ tasksx { totalCount } }`, nil, nil)
	require.Contains(t, err.Error(), "Did you mean", "with introspection on, suggestions help")
	require.NoError(t, off.c.Do(ctxFor(t), `{ __typename stats { submitted } }`, nil, nil), "the rest works")
}

func TestWithoutAuthenticationOnlyLoopbackHostsAreAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	port := b.base[strings.LastIndex(b.base, ":")+1:]
	for host, ok := range map[string]bool{
		"127.0.0.1:" + port: true, "localhost:" + port: true, "[::1]:" + port: true, "app.localhost:" + port: true,
		"rebound.attacker.example:" + port: false, "10.0.0.8:" + port: false,
	} {
		req, _ := http.NewRequest(http.MethodPost, b.base+"/graphql", strings.NewReader(`{"query":"{ stats { submitted } }"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		if ok {
			require.Equal(t, http.StatusOK, res.StatusCode, host)
		} else {
			require.Equal(t, http.StatusMisdirectedRequest, res.StatusCode, "%s: a page that rebinds its name to 127.0.0.1 gets nothing", host)
		}
	}
	// With tokens, the token is what counts.
	tokens, secrets := withTokens(t, [3]string{"viewer", "reader", ""})
	authed := setup(t, tokens)
	req, _ := http.NewRequest(http.MethodPost, authed.base+"/graphql", strings.NewReader(`{"query":"{ stats { submitted } }"}`))
	req.Host = "switchyard.internal.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secrets["viewer"])
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
}

func TestAConnectionHoldsAtMostItsLimitOfSubscriptions(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.limits = resolvers.Limits{MaxSubscriptionsPerConnection: 3} })
	ctx := ctxFor(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	var subs []*client.Subscription
	for i := 0; i < 3; i++ {
		s, err := conn.Subscribe(ctx, `subscription { stats(intervalMs: 100) { submitted } }`, nil)
		require.NoError(t, err)
		_, err = s.Next(ctx)
		require.NoError(t, err)
		subs = append(subs, s)
	}
	extra, err := conn.Subscribe(ctx, `subscription { stats(intervalMs: 100) { submitted } }`, nil)
	require.NoError(t, err)
	e := subscriptionError(t, ctx, extra)
	require.Equal(t, "LIMIT", e.Code())
	require.Contains(t, e.Message, "limit is 3")

	// Another connection has its own allowance; a stopped subscription
	// frees its place.
	other, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer other.Close()
	s, err := other.Subscribe(ctx, `subscription { stats(intervalMs: 100) { submitted } }`, nil)
	require.NoError(t, err)
	_, err = s.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, subs[0].Stop(ctx))
	waitfor.Eventually(t, "the stopped subscription's place is free", func() bool {
		s, err := conn.Subscribe(ctx, `subscription { stats(intervalMs: 100) { submitted } }`, nil)
		if err != nil {
			return false
		}
		m, err := s.Next(ctx)
		return err == nil && len(m.Errors) == 0
	})
}

func TestInstanceTokensAndURLCredentialsNeverComeBack(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.registry = true })
	ctx := ctxFor(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, `subscription { instanceEvents { kind instance { id url hasToken labels { key value } } } }`, nil)
	require.NoError(t, err)
	b.waitSubscribed(t, "instanceEvents", 1)
	var reg struct{ RegisterInstance map[string]any }
	require.NoError(t, b.c.Do(ctx, `mutation { registerInstance(input: {id: "fleet", url: "http://127.0.0.1:1", token: "inst-s3cret"}) {
		id url kind capacity hasToken health labels { key } } }`, nil, &reg))
	require.Equal(t, true, reg.RegisterInstance["hasToken"])
	var upd map[string]any
	require.NoError(t, b.c.Do(ctx, `mutation { updateInstance(id: "fleet", input: {token: "new-s3cret"}) { id url hasToken } }`, nil, &upd))
	var q map[string]any
	require.NoError(t, b.c.Do(ctx, `{ instances { id url hasToken lastError } instance(id: "fleet") { id url } }`, nil, &q))
	m, err := sub.Next(ctx)
	require.NoError(t, err)
	for _, v := range []any{reg, upd, q, string(m.Data)} {
		out, _ := json.Marshal(v)
		require.NotContains(t, string(out), "s3cret")
	}

	// Credentials in URLs would be shown to every reader: refused.
	for _, q := range []string{
		`mutation { registerInstance(input: {id: "x", url: "http://user:pw@127.0.0.1:1"}) { id } }`,
		`mutation { updateInstance(id: "fleet", input: {url: "http://user:pw@127.0.0.1:1"}) { id } }`,
		`mutation { submitTask(input: {agentId: "a", action: {kind: "click"}, webhookUrl: "https://u:pw@hooks.example.com/x"}) { id } }`,
	} {
		err := b.c.Do(ctx, q, nil, nil)
		e := gqlErr(t, err)
		require.Equal(t, "INVALID_INPUT", e.Code(), q)
		require.NotContains(t, e.Message, "pw", "the refusal does not echo the credentials")
	}
}

func TestPluginUploadsOverTheCapAreRefusedBeforeDecoding(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.plugins = true
		o.limits = resolvers.Limits{MaxBodyBytes: 64 << 20}
	})
	huge := strings.Repeat("A", 4*(b.plugins.MaxWasmBytes()/3)+64) // just over the cap once decoded
	// Sending and reading a 22 MiB body under -race takes tens of seconds
	// on a busy machine: what the test holds is the refusal, not its speed.
	c := b.clientWith("")
	c.HTTP.Timeout = 5 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	err := c.Do(ctx, `mutation($w: String!) { loadPlugin(input: {name: "big", wasmBase64: $w}) { name } }`, map[string]any{"w": huge}, nil)
	e := gqlErr(t, err)
	require.Equal(t, "LIMIT", e.Code())
	require.Equal(t, "input.wasmBase64", e.Field())
	t.Logf("refused a %d MiB upload in %s", len(huge)>>20, time.Since(start))
}

// The largest module plugins.maxWasmBytes allows loads through loadPlugin
// with the default request body limit (4 MiB): an admin's requests may be
// as large as the module in base64.
func TestTheLargestModuleLoadsThroughLoadPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	mod, ok := builtin.ForSlot(policy.SlotRetry)
	require.True(t, ok)
	maxBytes := b.plugins.MaxWasmBytes()
	// Pad the built-in to exactly the cap with a custom section.
	name := []byte{3, 'p', 'a', 'd'}
	sizeLEB := func(n int) []byte {
		var out []byte
		for {
			c := byte(n & 0x7F)
			n >>= 7
			if n == 0 {
				return append(out, c)
			}
			out = append(out, c|0x80)
		}
	}
	payload := maxBytes - len(mod.Wasm) - 1 - 4 - len(name) // id, a 4-byte size, the name
	wasm := append([]byte(nil), mod.Wasm...)
	wasm = append(wasm, 0)
	wasm = append(wasm, sizeLEB(len(name)+payload)...)
	wasm = append(wasm, name...)
	wasm = append(wasm, make([]byte, maxBytes-len(wasm))...)
	require.Len(t, wasm, maxBytes)

	// Decoding, metering and compiling 16 MiB under -race takes tens of
	// seconds on a busy machine: the bound here is one such a machine keeps,
	// not a speed goal.
	c := b.clientWith("")
	c.HTTP.Timeout = 5 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var res struct{ LoadPlugin struct{ Size int } }
	err := c.Do(ctx, `mutation($w: String!) { loadPlugin(input: {name: "largest", wasmBase64: $w}) { size } }`,
		map[string]any{"w": base64.StdEncoding.EncodeToString(wasm)}, &res)
	require.NoError(t, err)
	require.Equal(t, maxBytes, res.LoadPlugin.Size)
}

// A body over the limit from someone who is not an admin says that an
// admin's may be larger: an operator's loadPlugin of a typical Go module
// (over 4 MiB in base64) would otherwise read as the module's fault.
func TestABodyOverTheLimitSaysAnAdminsMayBeLarger(t *testing.T) {
	t.Parallel()
	tokens, secrets := withTokens(t, [3]string{"root", "admin", ""}, [3]string{"ops", "operator", ""})
	b := setup(t, tokens, func(o *setupOptions) {
		o.plugins = true
		o.limits = resolvers.Limits{MaxBodyBytes: 64 << 10}
	})
	module := base64.StdEncoding.EncodeToString(make([]byte, 100<<10)) // over the operator's limit, within the admin's
	load := func(token string) error {
		return b.clientWith(token).Do(context.Background(), `mutation($w: String!) { loadPlugin(input: {name: "m", wasmBase64: $w}) { name } }`,
			map[string]any{"w": module}, nil)
	}
	e := gqlErr(t, load(secrets["ops"]))
	require.Equal(t, "LIMIT", e.Code())
	require.Contains(t, e.Message, "the limit is 65536 (an admin's request may have up to ")
	require.Contains(t, e.Message, "for loadPlugin, which needs the role admin)")
	// The admin's request is read, and refused for what it holds, not its size.
	e = gqlErr(t, load(secrets["root"]))
	require.NotEqual(t, "LIMIT", e.Code(), e.Message)

	// Over an admin's limit (declared: nothing of the body is read), the
	// refusal names the setting that sizes it.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		strings.TrimPrefix(b.base, "http://"), secrets["root"], 1<<30)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, string(body))
	require.Contains(t, string(body), "(room for a module of plugins.maxWasmBytes, "+strconv.Itoa(b.plugins.MaxWasmBytes())+" bytes, in base64)")
}
