package server_test

// Clients that send a body slowly, or not at all, over real loopback
// sockets: an authenticated one is cut when the body deadline passes (408),
// an unauthenticated one gets 401 before any of its body is read, and the
// streams that follow a body (SSE) outlive the deadline.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/waitfor"
)

// slowPost opens a connection and sends a POST to path that announces a
// 100,000-byte body; token may be empty.
func slowPost(t *testing.T, addr, path, token string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	_, err = conn.Write([]byte(head + "\r\n"))
	require.NoError(t, err)
	return conn
}

// trickle sends one byte every pause until the connection fails or stop
// closes; it returns how many it sent.
func trickle(conn net.Conn, pause time.Duration, stop <-chan struct{}) int {
	sent := 0
	for sent < 100000 {
		select {
		case <-stop:
			return sent
		case <-time.After(pause):
		}
		if _, err := conn.Write([]byte{' '}); err != nil {
			return sent
		}
		sent++
	}
	return sent
}

func TestSlowBodiesAreCutAndUnauthenticatedOnesAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	const bodyTimeout = time.Second
	tokens, secrets := withTokens(t, [3]string{"root", "admin", ""})
	b := setup(t, tokens, func(o *setupOptions) { o.limits.BodyTimeout = bodyTimeout; o.keepAlive = 100 * time.Millisecond })
	addr := strings.TrimPrefix(b.base, "http://")

	// An SSE subscription opened before the attacks must outlive the body
	// deadline: the deadline covers reading the body, not the stream.
	c := b.clientWith(secrets["root"])
	stream, err := c.SubscribeSSE(ctxFor(t), `subscription { taskEvents(filter: {agentId: "slow"}) { kind taskId } }`, nil)
	require.NoError(t, err)
	defer stream.Close()
	opened := time.Now()
	waitfor.Eventually(t, "the subscription runs", func() bool {
		req, _ := http.NewRequest(http.MethodGet, b.base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+secrets["root"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return strings.Contains(string(body), `switchyard_graphql_subscriptions{subscription="taskEvents"} 1`)
	})

	const attackers = 6
	type answer struct {
		status  int
		sent    int
		elapsed time.Duration
		err     error
	}
	results := make(chan answer, 2*attackers)
	var wg sync.WaitGroup
	for i := range 2 * attackers {
		authenticated := i%2 == 0
		token := ""
		if authenticated {
			token = secrets["root"]
		}
		path := "/graphql"
		if i >= attackers {
			path = "/mcp" // the MCP endpoint has the same edge
		}
		conn := slowPost(t, addr, path, token)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			stop := make(chan struct{})
			sentc := make(chan int, 1)
			if authenticated {
				go func() { sentc <- trickle(conn, 200*time.Millisecond, stop) }()
			} else {
				sentc <- 0 // sends nothing after its headers
			}
			// A liveness bound, not a timing claim: at this pace the
			// body would take 20,000 s to arrive.
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			elapsed := time.Since(start)
			close(stop)
			sent := <-sentc
			if err != nil {
				results <- answer{err: err, sent: sent}
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			results <- answer{status: res.StatusCode, sent: sent, elapsed: elapsed}
		}()
	}
	wg.Wait()
	close(results)
	var cut, refused int
	for r := range results {
		require.NoError(t, r.err)
		switch r.status {
		case http.StatusRequestTimeout:
			cut++
			t.Logf("authenticated slow body cut with 408 after %s and %d bytes", r.elapsed, r.sent)
		case http.StatusUnauthorized:
			refused++
			t.Logf("unauthenticated slow body answered 401 after %s", r.elapsed)
		default:
			t.Fatalf("unexpected status %d", r.status)
		}
	}
	require.Equal(t, attackers, cut, "every authenticated slow body is cut")
	require.Equal(t, attackers, refused, "every unauthenticated one gets 401 without sending its body")

	// The stream outlived the deadline several times over and still
	// delivers.
	require.Greater(t, time.Since(opened), bodyTimeout)
	require.NoError(t, c.Do(ctxFor(t), `mutation { submitTask(input: {agentId: "slow", action: {kind: "click"}}) { id } }`, nil, nil))
	msg, err := stream.Next()
	require.NoError(t, err)
	require.Empty(t, msg.Errors)
	require.Contains(t, string(msg.Data), `"taskId"`, "the SSE stream still delivers")

	// A body that arrives in time is served as usual.
	require.NoError(t, c.Do(ctxFor(t), `{ stats { submitted } }`, nil, nil))
}
