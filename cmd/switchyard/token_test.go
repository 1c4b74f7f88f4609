package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestTokenNewPrintsATokenAndTheHashThatMatchesIt(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"token", "new", "--role", "agent", "--agent", "bot-7", "--json"}, &out, &errOut), errOut.String())
	var got struct{ Token, Hash, Name, Role, AgentID string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.True(t, strings.HasPrefix(got.Token, auth.TokenPrefix))
	require.Equal(t, "agent-bot-7", got.Name)
	require.Equal(t, "agent", got.Role)
	require.Equal(t, "bot-7", got.AgentID)
	h, err := auth.ParseHash(got.Hash)
	require.NoError(t, err)
	require.True(t, h.Matches(got.Token))
	require.False(t, h.Matches(got.Token+"x"))
	require.NotContains(t, got.Hash, got.Token)

	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"token", "new", "--role", "reader", "--name", "grafana"}, &out, &errOut))
	require.Regexp(t, `(?s)token: swy_\S+\nhash:  hmac-sha256:\S+\n.*- \{name: "grafana", hash: "hmac-sha256:[^"]+", role: reader\}`, out.String())

	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"token", "new", "--role", "worker", "--lanes", "jobs,scrape"}, &out, &errOut))
	require.Regexp(t, `- \{name: "worker", hash: "hmac-sha256:[^"]+", role: worker, lanes: \["jobs", "scrape"\]\}`, out.String())

	for _, bad := range [][]string{{"--role", "agent"}, {"--role", "king"}, {"--role", "admin", "--agent", "x"}, {"--name", "has space"},
		{"--role", "worker"}, {"--role", "reader", "--lanes", "jobs"}} {
		errOut.Reset()
		require.Equal(t, 2, run(context.Background(), append([]string{"token", "new"}, bad...), &out, &errOut), "%v", bad)
	}
}

func TestTokenHashHashesTheTokenOnStandardInput(t *testing.T) {
	t.Parallel()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	require.NoError(t, tokenCommand([]string{"hash"}, strings.NewReader(tok+"\n"), &out, &errOut))
	h, err := auth.ParseHash(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	require.True(t, h.Matches(tok))

	out.Reset()
	require.NoError(t, tokenCommand([]string{"hash"}, strings.NewReader(tok+"\n"), &out, &errOut))
	require.NotEqual(t, h.String(), strings.TrimSpace(out.String()), "each hash has its own salt")

	require.ErrorContains(t, tokenCommand([]string{"hash"}, strings.NewReader("short\n"), &out, &errOut), "at least 32 characters")
	require.ErrorIs(t, tokenCommand([]string{"hash"}, strings.NewReader(""), &out, &errOut), errUsage)
}

// startServeLogged runs `switchyard serve` with args, on the memory store
// without a browser instance, until the test ends, and returns its base URL
// and its log.
func startServeLogged(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	s := startServe(t, append([]string{"--no-local-instance", "--log-format", "json", "--shutdown-grace", "1s", "--store", "memory"}, args...)...)
	return strings.TrimSuffix(s.URL, "/graphql"), s.Logs
}

func TestServeWithTokensNeedsThemAndAuditsMutationsWithoutSecrets(t *testing.T) {
	t.Parallel()
	newToken := func() (string, string) {
		tok, err := auth.NewToken()
		require.NoError(t, err)
		h, err := auth.HashToken(tok)
		require.NoError(t, err)
		return tok, h
	}
	adminTok, adminHash := newToken()
	botTok, botHash := newToken()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
auth:
  adminTokenHash: "`+adminHash+`"
  tokens:
    - {name: bot-7, hash: "`+botHash+`", role: agent, agentId: agent-7}
webhooks: {secret: webhook-s3cret}
`), 0o600))
	base, logs := startServeLogged(t, "--listen", "127.0.0.1:0", "--config", cfg)

	anon := client.New(base + "/graphql")
	_, status, err := anon.Raw(context.Background(), client.Request{Query: `{ stats { submitted } }`})
	require.Equal(t, http.StatusUnauthorized, status)
	var errs client.Errors
	require.NoError(t, err)

	bot := client.New(base + "/graphql")
	bot.Header.Set("Authorization", "Bearer "+botTok)
	var res struct{ SubmitTask struct{ ID string } }
	require.NoError(t, bot.Do(context.Background(), `mutation { submitTask(input: {agentId: "agent-7", action: {kind: "click"}}) { id } }`, nil, &res))
	err = bot.Do(context.Background(), `mutation { submitTask(input: {agentId: "agent-8", action: {kind: "click"}}) { id } }`, nil, nil)
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "FORBIDDEN", errs[0].Code())
	err = bot.Do(context.Background(), `mutation { drain { draining } }`, nil, nil)
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "FORBIDDEN", errs[0].Code())

	admin := client.New(base + "/graphql")
	admin.Header.Set("Authorization", "Bearer "+adminTok)
	require.NoError(t, admin.Do(context.Background(),
		`mutation { registerInstance(input: {id: "fleet", url: "http://127.0.0.1:1", token: "instance-s3cret"}) { id hasToken } }`, nil, nil))
	var inst struct{ Instances []map[string]any }
	require.NoError(t, admin.Do(context.Background(), `{ instances { id url hasToken } }`, nil, &inst))
	require.NotContains(t, mustMarshal(t, inst), "instance-s3cret")

	// One audit line per mutation, on switchyard.audit, naming the token
	// and never carrying a secret.
	type line struct {
		Module  string   `json:"@module"`
		Message string   `json:"@message"`
		Op      string   `json:"op"`
		Token   string   `json:"token"`
		Role    string   `json:"role"`
		Outcome string   `json:"outcome"`
		Targets []string `json:"targets"`
	}
	var audit []line
	waitfor.Eventually(t, "four operations are audited", func() bool {
		audit = audit[:0]
		for _, raw := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l line
			if json.Unmarshal([]byte(raw), &l) == nil && l.Module == "switchyard.audit" {
				audit = append(audit, l)
			}
		}
		return len(audit) >= 4
	})
	require.Len(t, audit, 4, logs.String())
	require.Equal(t, "submitTask", audit[0].Op)
	require.Equal(t, "bot-7", audit[0].Token)
	require.Equal(t, "ok", audit[0].Outcome)
	require.Contains(t, audit[0].Targets, "task:"+res.SubmitTask.ID)
	require.Equal(t, "FORBIDDEN", audit[1].Outcome, "a refused submission is audited")
	require.Equal(t, []string{"drain", "FORBIDDEN"}, []string{audit[2].Op, audit[2].Outcome})
	require.Equal(t, []string{"registerInstance", "admin", "admin", "ok"}, []string{audit[3].Op, audit[3].Token, audit[3].Role, audit[3].Outcome})
	require.Contains(t, audit[3].Targets, "instance:fleet")
	for _, secret := range []string{adminTok, botTok, "instance-s3cret", "webhook-s3cret"} {
		require.NotContains(t, logs.String(), secret)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestServeRefusesToListenBeyondLoopbackWithoutTokensUnlessInsecure(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"serve", "--listen", "0.0.0.0:0", "--no-local-instance", "--store", "memory"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--insecure")
	require.Contains(t, errOut.String(), "auth.tokens")

	_, logs := startServeLogged(t, "--listen", "0.0.0.0:0", "--insecure")
	require.Contains(t, logs.String(), "INSECURE")
}

func TestBenchAgainstASecuredServerSendsItsToken(t *testing.T) {
	t.Parallel()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	hash, err := auth.HashToken(tok)
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	// A benchmark needs more than the default 100 mutations per second.
	require.NoError(t, os.WriteFile(cfg, []byte("auth:\n  adminTokenHash: \""+hash+"\"\nlimits:\n  mutationsPerSecond: -1\n"), 0o600))
	base, _ := startServeLogged(t, "--listen", "127.0.0.1:0", "--config", cfg)
	bench := func(token string, mode ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		args := append([]string{"bench", "--server", base + "/graphql", "--token", token,
			"--duration", "300ms", "--warmup", "50ms", "--json"}, mode...)
		code := run(context.Background(), args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, mode := range [][]string{
		{"--mode", "batch", "--batch", "10", "--concurrency", "2"},
		{"--mode", "fanout", "--subscribers", "2", "--rate", "200", "--feed"},
	} {
		code, out, errOut := bench(tok, mode...)
		require.Equal(t, 0, code, "%v: %s", mode, errOut)
		var res struct {
			Errors uint64
			Tasks  uint64
			Fanout *struct{ Connected int }
		}
		require.NoError(t, json.Unmarshal([]byte(out), &res), "%v", mode)
		require.Zero(t, res.Errors, "%v: %s", mode, out)
		if res.Fanout != nil {
			require.Equal(t, 2, res.Fanout.Connected, "the subscribers' upgrades carry the token")
		} else {
			require.Positive(t, res.Tasks, "%v", mode)
		}
	}
	code, out, errOut := bench("", "--mode", "batch", "--batch", "10", "--concurrency", "2")
	var res struct{ Errors, Tasks uint64 }
	if code == 0 {
		require.NoError(t, json.Unmarshal([]byte(out), &res))
	}
	require.True(t, code != 0 || res.Errors > 0 && res.Tasks == 0, "without the token the server refuses the load: %s", errOut)
}
