package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// dbProxy forwards TCP connections to the database until it is cut: then
// it closes its listener and every connection, so that new connections to
// its address are refused — the database host gone, as far as the server
// can tell, without stopping the database others share.
type dbProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newDBProxy(t *testing.T, target string) *dbProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dbProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(d, c); _ = d.Close() }()
			go func() { _, _ = io.Copy(c, d); _ = c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *dbProxy) cut() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestAnUnreachableDatabaseIsReportedWithoutItsConnectionDetails runs
// `switchyard serve` on PostgreSQL through a proxy and then takes the
// proxy away: connections are refused. Clients (GraphQL, and /readyz,
// which needs no token) learn that the database cannot be reached and why,
// in the product's words — not the user, host, port or database name the
// driver puts in its errors; the log has the full error, for operators.
func TestAnUnreachableDatabaseIsReportedWithoutItsConnectionDetails(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the commit timeout")
	}
	dbURL := pgtest.URL(t) // skips without PostgreSQL
	schema := pgtest.Schema(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy := newDBProxy(t, u.Host)
	_, port, _ := net.SplitHostPort(proxy.ln.Addr().String())
	u.Host = proxy.ln.Addr().String()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("store: {driver: postgres, url: \""+u.String()+"\", schema: \""+schema+"\"}\n"+
		"engine: {commitTimeout: 1s}\n"), 0o644))
	s := startServe(t, "--config", cfg, "--listen", "127.0.0.1:0", "--no-local-instance",
		"--log-level", "info", "--shutdown-grace", "100ms")
	base := strings.TrimSuffix(s.URL, "/graphql")
	c := client.New(s.URL)
	submit := func(key string) (string, error) {
		var res struct{ SubmitTask struct{ ID string } }
		err := c.Do(context.Background(), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"agentId": "a", "idempotencyKey": key, "action": map[string]any{"kind": "click", "selector": "css:#go"}}}, &res)
		return res.SubmitTask.ID, err
	}
	readyz := func() (int, string) {
		res, err := http.Get(base + "/readyz")
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	// "switchyard ready" is logged once the API serves, which may be before
	// the node holds the leader lease: a change made then waits for a
	// leader and, on a busy machine, may answer UNAVAILABLE (retryable)
	// first. A client retries it under the same key, as this one does.
	var id string
	waitfor.Eventually(t, "the first task is submitted", func() bool {
		var err error
		id, err = submit("before")
		if err != nil {
			require.Contains(t, err.Error(), "UNAVAILABLE", "only waiting for a leader is retried")
		}
		return err == nil
	})

	proxy.cut()

	// Nothing that names the connection: not the driver, the user, the host,
	// the port, the database or a URL.
	secret := regexp.MustCompile(`(?i)postgres|127\.0\.0\.1|localhost|:` + port + `\b|\b` + port + `\b|\b` +
		regexp.QuoteMeta(strings.TrimPrefix(u.Path, "/")) + `\b|user=|database=|` + regexp.QuoteMeta(schema) + `|\.go:\d`)
	clean := func(what, msg string) {
		t.Helper()
		require.Falsef(t, secret.MatchString(msg), "%s discloses %q: %s", what, secret.FindString(msg), msg)
	}

	// Sent by hand, to read the response's header: the error names its
	// request (extensions.requestId), as the response does (X-Request-Id)
	// and the log line of the full error (request_id, below).
	during, err := json.Marshal(map[string]any{"query": `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
		"variables": map[string]any{"in": map[string]any{"agentId": "a", "idempotencyKey": "during", "action": map[string]any{"kind": "click", "selector": "css:#go"}}}})
	require.NoError(t, err)
	res, err := http.Post(s.URL, "application/json", bytes.NewReader(during))
	require.NoError(t, err)
	var answer client.Response
	require.NoError(t, json.NewDecoder(res.Body).Decode(&answer))
	_ = res.Body.Close()
	require.NotEmpty(t, answer.Errors)
	errs := answer.Errors
	t.Logf("submitTask: %v", errs)
	require.Equal(t, "UNAVAILABLE", errs[0].Code())
	require.Equal(t, true, errs[0].Extensions["retryable"])
	clean("submitTask", errs[0].Message)
	require.Contains(t, errs[0].Message, "the database cannot be reached (")
	requestID := res.Header.Get("X-Request-Id")
	require.NotEmpty(t, requestID, "the response names its request")
	require.Equal(t, requestID, errs[0].Extensions["requestId"])

	var list struct {
		Tasks struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	err = c.Do(context.Background(), `{ tasks(first: 5) { edges { node { id } } } }`, nil, &list)
	if err != nil {
		t.Logf("tasks: %v", err)
		clean("tasks", err.Error())
	}
	err = c.Do(context.Background(), `query($id: ID!) { task(id: $id) { id state } }`, map[string]any{"id": id}, nil)
	if err != nil {
		t.Logf("task: %v", err)
		clean("task", err.Error())
	}

	// The first heartbeat after the cut may fail on a connection it held
	// (connection lost); the next ones, on new connections, are refused.
	// Every answer on the way names no connection detail.
	var body string
	waitfor.Eventually(t, "readyz says the database refuses connections", func() bool {
		var status int
		status, body = readyz()
		clean("/readyz", body)
		return status == http.StatusServiceUnavailable && strings.Contains(body, "the database cannot be reached (connection refused)")
	})
	t.Logf("readyz: %s", strings.TrimSpace(body))

	// Now that new connections are refused, answers say so.
	_, err = submit("later")
	require.ErrorAs(t, err, &errs)
	t.Logf("submitTask: %v", err)
	clean("submitTask", errs[0].Message)
	require.Contains(t, errs[0].Message, "the database cannot be reached (connection refused)")

	// The operators' side: the log has the full errors, the database's
	// address in them, for the answers given and for /readyz.
	logs := s.Logs.String()
	for _, answered := range []string{"graphql", "readyz"} {
		line := ""
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "a client was told the database failed") && strings.Contains(l, "answered="+answered) {
				line = l
				break
			}
		}
		require.NotEmptyf(t, line, "the log says what %s withheld:\n%s", answered, logs)
		require.Contains(t, line, proxy.ln.Addr().String())
		if answered == "graphql" {
			require.Contains(t, line, "request_id="+requestID, "the line of the first error names its request")
		}
	}
}
