package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/config"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A taken port fails the start before any slow step runs: no browser is
// launched, no store opened, no policy compiled.
func TestServeFailsAtOnceOnATakenPort(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	db := filepath.Join(t.TempDir(), "switchyard.db")

	var mu sync.Mutex
	var steps []string
	var out, logs syncBuffer
	start := time.Now()
	err = serve(context.Background(), []string{"--listen", taken.Addr().String(), "--db", db}, &out, &logs, func(step string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, step)
	})
	t.Logf("a taken port failed the start after %s", time.Since(start))
	require.ErrorContains(t, err, "listen on "+taken.Addr().String())
	require.ErrorContains(t, err, "address already in use")
	require.ErrorContains(t, err, "--listen chooses another address")
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, steps, "nothing was started before the port was bound")
	require.NoFileExists(t, db, "the store was not opened")

	var stdout, stderr syncBuffer
	require.Equal(t, 1, run(context.Background(), []string{"serve", "--listen", taken.Addr().String(), "--db", db}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "switchyard serve: listen on "+taken.Addr().String())
}

// The server listens first: /healthz answers and /readyz says what is still
// starting while the policies compile; then the API takes over.
func TestServeAnswersHealthzBeforeThePoliciesAreReady(t *testing.T) {
	t.Parallel()
	reached, release := make(chan struct{}), make(chan struct{})
	var out, logs syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"--listen", "127.0.0.1:0", "--no-local-instance", "--db", filepath.Join(t.TempDir(), "switchyard.db")},
			&out, &logs, func(step string) {
				if step == stepPolicies {
					close(reached)
					<-release
				}
			})
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
		stop()
		select {
		case err := <-done:
			require.NoError(t, err, logs.String())
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("serve ended: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("the policies never started compiling:\n%s", logs.String())
	}

	// The policies are compiling (held here): the port answers already.
	m := regexp.MustCompile(`listening; starting up: address=(\S+)`).FindStringSubmatch(logs.String())
	require.NotNil(t, m, "the log says where it listens before it is ready:\n%s", logs.String())
	base := "http://" + m[1]
	require.Contains(t, logs.String(), "loading the WebAssembly policies (compiling them first if they are not in the cache yet)…", "the log says what it is doing")
	require.NotContains(t, out.String(), "GraphQL at", "not ready yet")

	code, body := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: loading the WebAssembly policies")
	res, err := http.Post(base+"/graphql", "application/json", strings.NewReader(`{"query":"{ stats { submitted } }"}`))
	require.NoError(t, err)
	gql, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	require.Contains(t, string(gql), `"code":"UNAVAILABLE"`)
	require.Contains(t, string(gql), `"retryable":true`)
	res, err = http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	require.NoError(t, err)
	rpc, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"), "an MCP client gets JSON-RPC, not the page")
	require.Contains(t, string(rpc), `"jsonrpc":"2.0"`)
	require.Contains(t, string(rpc), "the server is starting")
	code, body = get(t, base+"/")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "Switchyard is starting", "a browser gets a page that reloads itself")

	close(release)
	released = true
	waitfor.CheckForWithin(t, 90*time.Second, func() error { // a cold compile of the policies on a busy machine
		if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("readyz answers %d:\n%s", code, logs.String())
		}
		return nil
	})
	require.Contains(t, out.String(), "dashboard at "+base+"/dashboard/")
	require.Contains(t, out.String(), "GraphQL at "+base+"/graphql")
	require.Contains(t, out.String(), "MCP at "+base+"/mcp")
	require.Regexp(t, `switchyard ready: .*playground=`+regexp.QuoteMeta(base)+`/ dashboard=`+regexp.QuoteMeta(base)+`/dashboard/ graphql=`+regexp.QuoteMeta(base)+`/graphql mcp=`+regexp.QuoteMeta(base)+`/mcp`, logs.String())
	code, body = get(t, base+"/dashboard/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "<html")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body)
}

// A SQLite file in use by another server fails the start before the local
// browser is launched: the store is opened (its lock taken) first.
func TestServeOnAFileInUseStartsNoBrowser(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "switchyard.db")
	holder, err := sqlite.Open(context.Background(), sqlite.Options{Path: db, Owner: "the test"})
	require.NoError(t, err)
	defer holder.Close()
	config := filepath.Join(dir, "switchyard.yaml")
	// A browser path that does not exist: were the browser started before
	// the store, the start would fail on it (or, before, run it) instead.
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
store: {driver: sqlite, path: %q}
localInstance: {enabled: true, chromium: %q}
`, db, filepath.Join(dir, "no-such-chromium"))), 0o644))

	var mu sync.Mutex
	var steps []string
	var out, logs syncBuffer
	err = serve(context.Background(), []string{"--config", config, "--listen", "127.0.0.1:0"}, &out, &logs, func(step string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, step)
	})
	require.ErrorContains(t, err, "in use by another process")
	require.ErrorContains(t, err, "the test")
	require.ErrorContains(t, err, "stop it first, or give this server a database file of its own (--db)")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{stepStore}, steps, "only the store was tried:\n%s", logs.String())
	require.NotContains(t, logs.String(), "browser instance")
}

// The start's log says how many tokens of each role there are in words,
// not as a Go map.
func TestTheAuthLogCountsRolesReadably(t *testing.T) {
	t.Parallel()
	var tokens []auth.Token
	for i, r := range []auth.Role{auth.RoleAgent, auth.RoleAdmin, auth.RoleAgent} {
		tok, err := auth.NewToken()
		require.NoError(t, err)
		hash, err := auth.HashToken(tok)
		require.NoError(t, err)
		agent := ""
		if r == auth.RoleAgent {
			agent = fmt.Sprintf("a%d", i)
		}
		tokens = append(tokens, auth.Token{Name: fmt.Sprintf("t%d", i), Hash: hash, Role: r, AgentID: agent})
	}
	authn, err := auth.NewAuthenticator(tokens)
	require.NoError(t, err)
	var logs syncBuffer
	logSecurity(newLogger("info", "text", &logs), config.Default(), authn)
	require.Contains(t, logs.String(), `authentication is on: tokens=3 roles="admin=1 agent=2"`)
	require.NotContains(t, logs.String(), "map[")
}
