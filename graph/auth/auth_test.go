package auth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/generated"
	"github.com/switchyard/switchyard/graph/model"
)

func newToken(t *testing.T) (string, string) {
	t.Helper()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	h, err := auth.HashToken(tok)
	require.NoError(t, err)
	return tok, h
}

func TestATokenMatchesItsHashAndNothingElse(t *testing.T) {
	t.Parallel()
	tok, stored := newToken(t)
	require.Regexp(t, `^swy_[A-Za-z0-9_-]{43}$`, tok)
	require.Regexp(t, `^hmac-sha256:[A-Za-z0-9_-]{22}:[A-Za-z0-9_-]{43}$`, stored)
	h, err := auth.ParseHash(stored)
	require.NoError(t, err)
	require.Equal(t, stored, h.String())
	require.True(t, h.Matches(tok))
	for _, other := range []string{"", tok[:len(tok)-1], tok + "x", strings.ToUpper(tok), stored} {
		require.False(t, h.Matches(other), other)
	}
	again, err := auth.HashToken(tok)
	require.NoError(t, err)
	require.NotEqual(t, stored, again, "every hash has its own salt")
	other, _ := newToken(t)
	require.NotEqual(t, tok, other)
}

func TestHashTokenRefusesTokensThatAreNotRandomEnoughOrMalformed(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "password", strings.Repeat("a", auth.MinTokenLength-1), strings.Repeat("a", auth.MaxTokenLength+1),
		" " + strings.Repeat("a", 40), strings.Repeat("a", 20) + "\n" + strings.Repeat("a", 20)} {
		_, err := auth.HashToken(bad)
		require.Error(t, err, "%q", bad)
	}
	_, err := auth.HashToken(strings.Repeat("x", auth.MinTokenLength))
	require.NoError(t, err)
}

func TestParseHashRefusesWhatIsNotAHash(t *testing.T) {
	t.Parallel()
	_, good := newToken(t)
	parts := strings.Split(good, ":")
	for _, bad := range []string{"", "plain-token", "sha256:abc", "hmac-sha256:", "hmac-sha256:a:b",
		parts[0] + ":" + parts[1] + "AAAA:" + parts[2],   // a salt too long
		parts[0] + ":" + parts[1] + ":" + parts[2] + "A", // a digest too long
		parts[0] + ":" + parts[1][:21] + "_:" + parts[2], // non-canonical base64
		parts[0] + ":" + parts[1] + ":" + strings.Repeat("*", 43),
	} {
		_, err := auth.ParseHash(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestTheAuthenticatorMapsTokensToTheirIdentities(t *testing.T) {
	t.Parallel()
	adminTok, adminHash := newToken(t)
	botTok, botHash := newToken(t)
	a, err := auth.NewAuthenticator([]auth.Token{
		{Name: "root", Hash: adminHash, Role: auth.RoleAdmin},
		{Name: "bot", Hash: botHash, Role: auth.RoleAgent, AgentID: "agent-1"},
	})
	require.NoError(t, err)
	require.True(t, a.Enabled())
	for i := 0; i < 2; i++ { // the second time from the cache of verified tokens
		id, err := a.AuthenticateHeader("Bearer " + botTok)
		require.NoError(t, err)
		require.Equal(t, auth.Identity{Name: "bot", Role: auth.RoleAgent, AgentID: "agent-1"}, *id)
		require.Equal(t, "agent-1", id.Agent())
	}
	id, err := a.AuthenticateHeader("  bearer   " + adminTok + " ")
	require.NoError(t, err)
	require.Equal(t, "root", id.Name)
	require.Equal(t, "", id.Agent(), "an admin acts on every agent's work")
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic " + adminTok, adminTok, "Bearer " + adminHash, "Bearer " + strings.Repeat("a", 10_000)} {
		_, err := a.AuthenticateHeader(h)
		require.ErrorIs(t, err, auth.ErrUnauthenticated, "%q", h)
	}

	off, err := auth.NewAuthenticator(nil)
	require.NoError(t, err)
	require.False(t, off.Enabled())
	id, err = off.AuthenticateHeader("")
	require.NoError(t, err)
	require.Equal(t, *auth.Anonymous(), *id, "without tokens everyone is the anonymous admin")
	var none *auth.Authenticator
	_, err = none.Authenticate("")
	require.NoError(t, err)
}

func TestTheAuthenticatorRefusesABadConfigurationNamingTheToken(t *testing.T) {
	t.Parallel()
	_, h := newToken(t)
	for want, tokens := range map[string][]auth.Token{
		"tokens[0].name":    {{Name: "", Hash: h, Role: auth.RoleReader}},
		"tokens[1].name":    {{Name: "x", Hash: h, Role: auth.RoleReader}, {Name: "x", Hash: h, Role: auth.RoleReader}},
		"tokens[0].hash":    {{Name: "x", Hash: "nope", Role: auth.RoleReader}},
		"tokens[0].role":    {{Name: "x", Hash: h}},
		"tokens[0].agentId": {{Name: "x", Hash: h, Role: auth.RoleAgent}},
	} {
		_, err := auth.NewAuthenticator(tokens)
		require.ErrorContains(t, err, want)
	}
	_, err := auth.NewAuthenticator([]auth.Token{{Name: "x", Hash: h, Role: auth.RoleOperator, AgentID: "a"}})
	require.ErrorContains(t, err, "tokens[0].agentId", "only agent tokens are bound to an agent")
}

func TestRolesReadAndWriteByName(t *testing.T) {
	t.Parallel()
	for _, r := range auth.Roles() {
		got, err := auth.ParseRole(r.String())
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	_, err := auth.ParseRole("root")
	require.Error(t, err)
	require.Equal(t, "admin, agent", auth.SetOf(auth.RoleAgent, auth.RoleAdmin).String())
}

// fakeClock is a clock the test moves.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestTheRateLimiterIsATokenBucketPerIdentity(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l := auth.NewRateLimiter(10, 5, clk.Now) // 10 a second, bursts of 5
	for i := 0; i < 5; i++ {
		ok, _ := l.Take("a", 1)
		require.True(t, ok, "the burst passes: %d", i)
	}
	ok, wait := l.Take("a", 1)
	require.False(t, ok)
	require.Equal(t, 100*time.Millisecond, wait, "one token comes back every 100 ms")
	ok, _ = l.Take("b", 5)
	require.True(t, ok, "every identity has its own bucket")

	clk.now = clk.now.Add(250 * time.Millisecond)
	ok, _ = l.Take("a", 2)
	require.True(t, ok, "2.5 tokens came back")
	ok, wait = l.Take("a", 2)
	require.False(t, ok, "a refused take takes nothing")
	require.Equal(t, 150*time.Millisecond, wait)

	clk.now = clk.now.Add(time.Hour)
	ok, _ = l.Take("a", 5)
	require.True(t, ok, "a bucket refills up to its burst")
	ok, _ = l.Take("a", 1)
	require.False(t, ok, "and no further")

	ok, wait = l.Take("a", 6)
	require.False(t, ok)
	require.Negative(t, wait, "more than a burst can never pass")
	require.Equal(t, 5, l.Burst())

	require.Nil(t, auth.NewRateLimiter(0, 10, nil), "a rate of 0 is no limit")
	var none *auth.RateLimiter
	ok, _ = none.Take("a", 1000)
	require.True(t, ok)
}

func TestTheAccessTableCoversTheSchemaExactly(t *testing.T) {
	t.Parallel()
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	require.Empty(t, auth.Missing(schema), "every operation of the schema needs an entry in graph/auth/access.go")
	for op := range auth.Operations() {
		root, field, _ := strings.Cut(op, ".")
		def := schema.Types[root]
		require.NotNil(t, def, op)
		require.NotNil(t, def.Fields.ForName(field), "the access table lists %s, which the schema does not have", op)
	}
	// The table's promises, stated once more: plugin code is the admin's,
	// readers change nothing, and everyone reads.
	for op, a := range auth.Operations() {
		mutation := strings.HasPrefix(op, "Mutation.")
		require.Equal(t, !mutation, a.Roles.Has(auth.RoleReader), "%s: readers read, and only read", op)
		require.True(t, a.Roles.Has(auth.RoleAdmin), "%s: admins may do everything", op)
	}
	for _, op := range []string{"Mutation.loadPlugin", "Mutation.unloadPlugin"} {
		root, field, _ := strings.Cut(op, ".")
		a, ok := auth.Lookup(root, field)
		require.True(t, ok)
		require.Equal(t, auth.SetOf(auth.RoleAdmin), a.Roles, op)
	}
}

// accessMarkdown renders the access table for the README: one row per kind
// of access, its operations in schema order.
func accessMarkdown(schemaOrder []string) string {
	type row struct {
		who string
		ops []string
	}
	describe := func(a auth.Access) string {
		var who []string
		for _, r := range auth.Roles() {
			if !a.Roles.Has(r) {
				continue
			}
			if r == auth.RoleAgent && a.OwnOnly {
				who = append(who, "agent (its own work)")
				continue
			}
			who = append(who, r.String())
		}
		return strings.Join(who, ", ")
	}
	var rows []*row
	byWho := map[string]*row{}
	ops := auth.Operations()
	for _, op := range schemaOrder {
		w := describe(ops[op])
		if byWho[w] == nil {
			byWho[w] = &row{who: w}
			rows = append(rows, byWho[w])
		}
		byWho[w].ops = append(byWho[w].ops, "`"+op+"`")
	}
	var b strings.Builder
	b.WriteString("| who may run it | operations |\n| --- | --- |\n")
	for _, r := range rows {
		b.WriteString("| " + r.who + " | " + strings.Join(r.ops, ", ") + " |\n")
	}
	return b.String()
}

func TestTheREADMEShowsTheAccessTable(t *testing.T) {
	t.Parallel()
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	var order []string
	for _, root := range []string{"Query", "Mutation", "Subscription"} {
		for _, f := range schema.Types[root].Fields {
			if !strings.HasPrefix(f.Name, "__") {
				order = append(order, root+"."+strings.TrimSpace(f.Name))
			}
		}
	}
	want := accessMarkdown(order)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "<!-- access table: generated from graph/auth/access.go by TestTheREADMEShowsTheAccessTable -->\n")
	require.True(t, ok, "the README's access table marker is missing")
	got, _, ok := strings.Cut(rest, "<!-- /access table -->")
	require.True(t, ok)
	if got != want {
		t.Fatalf("the README's access table is stale; it should read:\n\n%s", want)
	}
}

func TestAWorkerMayPullItsOwnLanesOnly(t *testing.T) {
	t.Parallel()
	w := &auth.Identity{Name: "crawler", Role: auth.RoleWorker, Lanes: []string{"jobs"}}
	require.True(t, w.MayPull("jobs"))
	require.False(t, w.MayPull("other"))
	require.True(t, (&auth.Identity{Role: auth.RoleOperator}).MayPull("other"))
	require.False(t, (&auth.Identity{Role: auth.RoleAgent, AgentID: "a"}).MayPull("jobs"))
	require.False(t, (&auth.Identity{Role: auth.RoleReader}).MayPull("jobs"))
	for op, a := range auth.Operations() {
		require.Equal(t, strings.HasPrefix(op, "Mutation.") && strings.Contains("leaseTasks renewLease completeTask failTask releaseTask", strings.TrimPrefix(op, "Mutation.")),
			a.Roles.Has(auth.RoleWorker), "%s: a worker runs the pull calls and nothing else", op)
	}
}

// TestTargetsOfABatch: an audit line names each agent of a batch once, the
// batch, and its tasks, in that order, at most 128 in all.
func TestTargetsOfABatch(t *testing.T) { // not parallel: it counts allocations
	var in model.SubmitTasksInput
	res := &model.SubmitTasksPayload{BatchID: new("b1")}
	for i := range 200 {
		in.Items = append(in.Items, &model.BatchItemInput{Task: &model.SubmitTaskInput{AgentID: []string{"a", "b", "a", "c"}[i%4]}})
		res.Items = append(res.Items, &model.SubmitTaskResult{Index: i, Task: model.NewTask(&engine.Task{ID: fmt.Sprintf("t%03d", i)})})
	}
	got := auth.Targets("submitTasks", map[string]any{"input": in}, res)
	want := []string{"agent:a", "agent:b", "agent:c", "batch:b1"}
	for i := range 124 {
		want = append(want, fmt.Sprintf("task:t%03d", i))
	}
	require.Equal(t, want, got)
	// A string per target named, not per item: the batch's 200 agents and
	// the tasks past the cap cost none.
	allocs := testing.AllocsPerRun(10, func() { auth.Targets("submitTasks", map[string]any{"input": in}, res) })
	require.LessOrEqual(t, allocs, float64(len(want)+32)) // and the map and list growing
}

// A client that waits retryAfterMs finds its token there: the wait is
// rounded up to the millisecond, never down, and the message says the same.
func TestRetryAfterMsIsNeverShorterThanTheWait(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wait time.Duration
		want int64
	}{
		{3600 * time.Microsecond, 4},
		{3200 * time.Microsecond, 4},
		{3 * time.Millisecond, 3},
		{200 * time.Microsecond, 1},
		{0, 1},
		{333333333 * time.Nanosecond, 334},
	} {
		e := auth.Error(auth.CodeRateLimited, "over its rate", c.wait)
		require.Equal(t, c.want, e.Extensions["retryAfterMs"], "a wait of %s", c.wait)
		require.GreaterOrEqual(t, time.Duration(c.want)*time.Millisecond, c.wait)
	}
}
