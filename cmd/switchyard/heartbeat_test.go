package main

// Heartbeat checks through a running server (issue 22 §5): created and
// probed over the API, their state changes on the subscription and the
// webhook, their history across a restart, and targets that misbehave.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

type hbSample struct {
	OK         bool
	HTTPStatus *int
	Error      *string
	LatencyMs  float64
}

type hbCheck struct {
	ID                  string
	State               string
	ConsecutiveFailures int
	History             []hbSample
	Uptime              *float64
	WebhookDeliveries   []struct{ Delivered bool }
}

const hbFields = `id state consecutiveFailures uptime history { ok httpStatus error latencyMs } webhookDeliveries { delivered }`

func createCheck(t *testing.T, c *client.Client, input map[string]any) hbCheck {
	t.Helper()
	var out struct{ CreateHeartbeatCheck hbCheck }
	require.NoError(t, c.Do(context.Background(), `mutation($in: HeartbeatCheckInput!) { createHeartbeatCheck(input: $in) { `+hbFields+` } }`,
		map[string]any{"in": input}, &out))
	return out.CreateHeartbeatCheck
}

func probeCheck(t *testing.T, c *client.Client, id string) hbCheck {
	t.Helper()
	var out struct{ ProbeHeartbeatCheck hbCheck }
	require.NoError(t, c.Do(context.Background(), `mutation($id: ID!) { probeHeartbeatCheck(id: $id) { `+hbFields+` } }`,
		map[string]any{"id": id}, &out))
	return out.ProbeHeartbeatCheck
}

func lastSample(c hbCheck) hbSample { return c.History[len(c.History)-1] }

type hbEvent struct {
	CheckID, From, To string
	Sample            hbSample
}

func nextHeartbeatEvent(t *testing.T, s *client.SSEStream) hbEvent {
	t.Helper()
	m, err := s.Next()
	require.NoError(t, err)
	require.Empty(t, m.Errors)
	var out struct{ HeartbeatEvents hbEvent }
	require.NoError(t, json.Unmarshal(m.Data, &out))
	return out.HeartbeatEvents
}

// A target that goes down and comes back: exactly two state changes on the
// subscription and at the webhook, and the check with its history is back
// after a restart on the same SQLite file.
func TestHeartbeatDownAndUpMakesTwoEventsAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	healthy.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	t.Cleanup(target.Close)
	hooks := newHookReceiver(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "switchyard.db")
	yml := "heartbeats:\n  allowNetworks: [127.0.0.1/32]\nwebhooks:\n  allowPrivate: true\n"
	cfg := writeFile(t, "switchyard.yaml", yml)
	base, stop := serveOn(t, db, "--config", cfg)
	c := client.New(base + "/graphql")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := c.SubscribeSSE(ctx, `subscription { heartbeatEvents { checkId from to sample { ok httpStatus error } } }`, nil)
	require.NoError(t, err)
	defer stream.Close()
	// A check of a port nobody listens on: its first probe fails, UNKNOWN →
	// DOWN, which tells the stream is live before the real check starts.
	closed := closedPort(t)
	sentinel := createCheck(t, c, map[string]any{"name": "nobody", "url": "http://" + closed + "/", "enabled": false, "timeoutMs": 5000})
	require.Equal(t, "UNKNOWN", sentinel.State)
	require.Equal(t, "DOWN", probeCheck(t, c, sentinel.ID).State)
	ev := nextHeartbeatEvent(t, stream)
	require.Equal(t, hbEvent{CheckID: sentinel.ID, From: "UNKNOWN", To: "DOWN"}, hbEvent{CheckID: ev.CheckID, From: ev.From, To: ev.To})
	require.Contains(t, *ev.Sample.Error, "connection refused")

	check := createCheck(t, c, map[string]any{"name": "shop", "url": target.URL + "/health", "intervalMs": 3_600_000, "enabled": false,
		"webhookUrl": hooks.URL + "/hb"})
	require.Equal(t, "UP", probeCheck(t, c, check.ID).State)
	require.Equal(t, "UP", probeCheck(t, c, check.ID).State)
	healthy.Store(false)
	got := probeCheck(t, c, check.ID)
	require.Equal(t, "DOWN", got.State)
	require.Equal(t, 502, *lastSample(got).HTTPStatus)
	require.Equal(t, "answered 502, expected 2xx", *lastSample(got).Error)
	require.Equal(t, "DOWN", probeCheck(t, c, check.ID).State)
	healthy.Store(true)
	got = probeCheck(t, c, check.ID)
	require.Equal(t, "UP", got.State)
	require.Len(t, got.History, 5)
	require.InDelta(t, 0.6, *got.Uptime, 1e-9)
	// The sentinel again, after the real check's probes: what came before it
	// on the stream is all the real check announced.
	probeCheck(t, c, sentinel.ID) // still DOWN: nothing to announce
	require.NoError(t, c.Do(context.Background(), `mutation($id: ID!, $in: HeartbeatCheckInput!) { updateHeartbeatCheck(id: $id, input: $in) { id } }`,
		map[string]any{"id": sentinel.ID, "in": map[string]any{"name": "nobody", "url": target.URL + "/", "enabled": false}}, nil))
	probeCheck(t, c, sentinel.ID) // a new URL starts over: UNKNOWN → UP, not announced
	healthy.Store(false)
	probeCheck(t, c, sentinel.ID) // UP → DOWN: the marker
	healthy.Store(true)

	var changes []string
	for {
		ev := nextHeartbeatEvent(t, stream)
		if ev.CheckID == sentinel.ID {
			require.Equal(t, "DOWN", ev.To)
			break
		}
		require.Equal(t, check.ID, ev.CheckID)
		changes = append(changes, ev.From+"→"+ev.To)
	}
	require.Equal(t, []string{"UP→DOWN", "DOWN→UP"}, changes)

	bodies := hooks.wait(t, "/hb", 2)
	require.Len(t, bodies, 2)
	for i, want := range [][2]string{{"UP", "DOWN"}, {"DOWN", "UP"}} {
		require.Equal(t, "heartbeat.state", bodies[i]["event"])
		ch := bodies[i]["check"].(map[string]any)
		require.Equal(t, check.ID, ch["id"])
		require.Equal(t, want[0], ch["previousState"])
		require.Equal(t, want[1], ch["state"])
	}

	stream.Close()
	cancel()
	stop() // the first server, before the second opens its file
	base, _ = serveOn(t, db, "--config", cfg)
	c = client.New(base + "/graphql")
	var out struct{ HeartbeatCheck hbCheck }
	require.NoError(t, c.Do(context.Background(), `query($id: ID!) { heartbeatCheck(id: $id) { `+hbFields+` } }`, map[string]any{"id": check.ID}, &out))
	require.Equal(t, "UP", out.HeartbeatCheck.State)
	require.Len(t, out.HeartbeatCheck.History, 5, "the latency history survives the restart")
	require.Len(t, out.HeartbeatCheck.WebhookDeliveries, 2)
}

// closedPort returns a loopback address nobody listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Targets that hang, answer slowly, redirect to a private address or answer
// garbage: each probe ends within its timeout with a clear state and error,
// and a private address is refused by default.
func TestHeartbeatAdversarialTargets(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(200 * time.Millisecond)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(slow.Close)
	redirect := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data/", http.StatusFound))
	t.Cleanup(redirect.Close)
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { garbage.Close() })
	go func() {
		for {
			conn, err := garbage.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n\x00\xff\xfe garbage\r\n\r\n"))
			}()
		}
	}()

	c := serveWithConfig(t, "heartbeats:\n  allowNetworks: [127.0.0.1/32]\n")
	start := time.Now()
	hung := probeCheck(t, c, createCheck(t, c, map[string]any{"name": "hang", "url": hang.URL, "intervalMs": 60_000, "timeoutMs": 300, "enabled": false}).ID)
	require.Less(t, time.Since(start), 30*time.Second, "bounded by the check's timeout")
	require.Equal(t, "DOWN", hung.State)
	require.Equal(t, "no answer within the 300ms timeout", *lastSample(hung).Error)
	require.Nil(t, lastSample(hung).HTTPStatus)

	slowed := probeCheck(t, c, createCheck(t, c, map[string]any{"name": "slow", "url": slow.URL, "timeoutMs": 30_000, "enabled": false}).ID)
	require.Equal(t, "UP", slowed.State)
	require.GreaterOrEqual(t, lastSample(slowed).LatencyMs, 200.0)

	redirected := probeCheck(t, c, createCheck(t, c, map[string]any{"name": "redirect", "url": redirect.URL, "followRedirects": true, "enabled": false}).ID)
	require.Equal(t, "DOWN", redirected.State)
	require.Contains(t, *lastSample(redirected).Error,
		"heartbeat check address 169.254.169.254 of 169.254.169.254 is not public; to call it, set heartbeats.allowPrivate or list its network in heartbeats.allowNetworks")

	junk := probeCheck(t, c, createCheck(t, c, map[string]any{"name": "garbage", "url": "http://" + garbage.Addr().String() + "/", "timeoutMs": 5000, "enabled": false}).ID)
	require.Equal(t, "DOWN", junk.State)
	require.Contains(t, *lastSample(junk).Error, "malformed HTTP")

	// Safe by default: a server without heartbeats settings refuses a
	// loopback target when the check is made, naming the field and the
	// settings; nothing is created.
	strict := serveWithConfig(t, "")
	err = strict.Do(context.Background(), `mutation { createHeartbeatCheck(input: {name: "local", url: "`+slow.URL+`"}) { id } }`, nil, nil)
	var gqlErr client.Errors
	require.True(t, errors.As(err, &gqlErr), "%v", err)
	require.Equal(t, "INVALID_INPUT", gqlErr[0].Code())
	require.Equal(t, "input.url", gqlErr[0].Field())
	require.Contains(t, gqlErr[0].Message, "heartbeats.allowPrivate")
	var list struct{ HeartbeatChecks []hbCheck }
	require.NoError(t, strict.Do(context.Background(), `{ heartbeatChecks { id } }`, nil, &list))
	require.Empty(t, list.HeartbeatChecks)
}

// An enabled check is probed by the server on its interval, without being
// asked.
func TestHeartbeatRunsOnItsInterval(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	c := serveWithConfig(t, "heartbeats:\n  allowNetworks: [127.0.0.1/32]\n")
	check := createCheck(t, c, map[string]any{"name": "ticking", "url": target.URL, "intervalMs": 1000})
	waitfor.CheckFor(t, func() error {
		var out struct{ HeartbeatCheck hbCheck }
		if err := c.Do(context.Background(), `query($id: ID!) { heartbeatCheck(id: $id) { `+hbFields+` } }`, map[string]any{"id": check.ID}, &out); err != nil {
			return err
		}
		if got := out.HeartbeatCheck; len(got.History) < 2 || got.State != "UP" {
			return fmt.Errorf("the check was not probed twice by itself: %+v", got)
		}
		return nil
	})
	require.GreaterOrEqual(t, hits.Load(), int64(2))
}
