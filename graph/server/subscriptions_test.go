package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// event is a TaskEvent as the tests select it.
type event struct {
	Seq     uint64
	Kind    string
	TaskID  string
	To      string
	Skipped uint64
	Reason  string
}

const eventsQ = `subscription($after: Int64, $filter: TaskEventFilter) {
	taskEvents(after: $after, filter: $filter) { seq kind taskId to skipped reason } }`

// subscriptionError reads a subscription's first message and returns its
// first error: a subscription refused before it starts answers with errors.
func subscriptionError(t *testing.T, ctx context.Context, s *client.Subscription) *client.Error {
	t.Helper()
	m, err := s.Next(ctx)
	var errs client.Errors
	if errors.As(err, &errs) {
		return errs[0]
	}
	require.NoError(t, err)
	require.NotEmpty(t, m.Errors, "want an error, got %s", m.Data)
	return m.Errors[0]
}

func nextEvent(t *testing.T, ctx context.Context, s *client.Subscription) event {
	t.Helper()
	m, err := s.Next(ctx)
	require.NoError(t, err)
	require.Empty(t, m.Errors)
	var out struct{ TaskEvents event }
	require.NoError(t, json.Unmarshal(m.Data, &out))
	return out.TaskEvents
}

func TestTaskEventsAreDeliveredOverBothWebSocketSubprotocols(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{client.TransportWS, client.LegacyWS} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			b := setup(t, succeed)
			ctx := ctxFor(t)
			conn, err := b.c.Dial(ctx, client.DialOptions{Protocol: proto})
			require.NoError(t, err)
			defer conn.Close()
			require.Equal(t, proto, conn.Protocol())
			sub, err := conn.Subscribe(ctx, eventsQ, map[string]any{"filter": map[string]any{"agentId": "ws"}})
			require.NoError(t, err)
			b.waitSubscribed(t, "taskEvents", 1) // it starts at the head of the log
			id := b.submit(t, "ws", nil)
			b.submit(t, "someone-else", nil)

			var states []string
			var last uint64
			for len(states) == 0 || states[len(states)-1] != "SUCCEEDED" {
				ev := nextEvent(t, ctx, sub)
				require.Equal(t, id, ev.TaskID, "the filter keeps this agent's events only")
				require.Greater(t, ev.Seq, last, "seqs increase")
				last = ev.Seq
				if ev.Kind == "STATE" {
					states = append(states, ev.To)
				}
			}
			require.Equal(t, "QUEUED", states[0])
			require.Contains(t, states, "ASSIGNED")
			require.NoError(t, sub.Stop(ctx))
		})
	}
}

func TestResumingWithAfterDeliversEveryMissedEventInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed)
	ctx := ctxFor(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	sub, err := conn.Subscribe(ctx, eventsQ, map[string]any{"after": 0})
	require.NoError(t, err)
	b.submit(t, "r", nil)
	var last uint64
	for {
		ev := nextEvent(t, ctx, sub)
		require.Equal(t, last+1, ev.Seq, "from after: 0 every event, without gaps")
		last = ev.Seq
		if ev.To == "SUCCEEDED" {
			break
		}
	}
	require.NoError(t, conn.Close())

	// While disconnected, more happens.
	b.submitMany(t, "r", 50)
	waitfor.Eventually(t, "the tasks end", func() bool {
		var out struct {
			Stats struct{ Pending, InFlight int }
		}
		require.NoError(t, b.c.Do(ctx, `{ stats { pending inFlight } }`, nil, &out))
		return out.Stats.Pending == 0 && out.Stats.InFlight == 0
	})
	var stats struct{ Stats struct{ LastSeq uint64 } }
	require.NoError(t, b.c.Do(ctx, `{ stats { lastSeq } }`, nil, &stats))
	head := stats.Stats.LastSeq
	require.Greater(t, head, last+100)

	for _, proto := range []string{client.TransportWS, client.LegacyWS} {
		conn, err := b.c.Dial(ctx, client.DialOptions{Protocol: proto})
		require.NoError(t, err)
		sub, err := conn.Subscribe(ctx, eventsQ, map[string]any{"after": last})
		require.NoError(t, err)
		for want := last + 1; want <= head; want++ {
			ev := nextEvent(t, ctx, sub)
			require.Equal(t, want, ev.Seq, "%s: resuming gets every missed event, in order", proto)
			require.NotEqual(t, "LAGGED", ev.Kind)
		}
		require.NoError(t, conn.Close())
	}

	// A resume point past the newest event is a mistake the client hears of.
	conn2, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn2.Close()
	sub2, err := conn2.Subscribe(ctx, eventsQ, map[string]any{"after": head + 1000})
	require.NoError(t, err)
	e := subscriptionError(t, ctx, sub2)
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "after", e.Field())
}

func TestResumingFromFurtherBackThanTheServerKeepsSaysSoWithLagged(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed, func(o *setupOptions) {
		o.config.EventBuffer = 16                   // the in-memory ring
		o.storeOpts = memory.Options{MaxEvents: 64} // the store keeps more, but not all
	})
	ctx := ctxFor(t)
	b.submitMany(t, "old", 60) // ~180 events
	waitfor.Eventually(t, "the tasks end", func() bool {
		var out struct {
			Stats struct{ Pending, InFlight int }
		}
		require.NoError(t, b.c.Do(ctx, `{ stats { pending inFlight } }`, nil, &out))
		return out.Stats.Pending == 0 && out.Stats.InFlight == 0
	})
	var stats struct{ Stats struct{ LastSeq uint64 } }
	require.NoError(t, b.c.Do(ctx, `{ stats { lastSeq } }`, nil, &stats))
	head := stats.Stats.LastSeq
	require.Greater(t, head, uint64(100))

	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, eventsQ, map[string]any{"after": 1})
	require.NoError(t, err)
	lag := nextEvent(t, ctx, sub)
	require.Equal(t, "LAGGED", lag.Kind)
	oldestStored := head - 63
	require.Equal(t, oldestStored-2, lag.Skipped, "events 2..%d are gone", oldestStored-1)
	require.Equal(t, oldestStored-1, lag.Seq, "a LAGGED notice carries the seq of the last event skipped")
	require.Contains(t, lag.Reason, "older than the server keeps")
	// Then every event the store and the ring hold, without a gap.
	for want := oldestStored; want <= head; want++ {
		ev := nextEvent(t, ctx, sub)
		require.Equal(t, want, ev.Seq)
	}
}

// slowDialer dials with a small receive buffer, so that a client that stops
// reading stops the server's writes soon.
func slowDialer() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}}
}

func TestASlowSubscriberIsSkippedAheadWithLaggedAndBlocksNobody(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed, func(o *setupOptions) {
		o.limits = resolvers.Limits{MaxSubscriberLag: 1000}
		o.sendBuffer = 4096
	})
	ctx := ctxFor(t)
	slowConn, err := b.c.Dial(ctx, client.DialOptions{HTTPClient: slowDialer(), Buffer: 1})
	require.NoError(t, err)
	defer slowConn.Close()
	slow, err := slowConn.Subscribe(ctx, eventsQ, nil)
	require.NoError(t, err)
	fastConn, err := b.c.Dial(ctx, client.DialOptions{Buffer: 4096})
	require.NoError(t, err)
	defer fastConn.Close()
	fast, err := fastConn.Subscribe(ctx, eventsQ, nil)
	require.NoError(t, err)
	b.waitSubscribed(t, "taskEvents", 2)

	// The fast subscriber reads everything; the slow one reads nothing while
	// thousands of events are committed. The load goes at the fast reader's
	// pace, so that it never falls behind.
	var seen atomic.Uint64
	var fastLagged atomic.Bool
	var fastGap atomic.Pointer[string]
	fctx, stopFast := context.WithCancel(ctx)
	defer stopFast()
	go func() {
		var last uint64
		for {
			m, err := fast.Next(fctx)
			if err != nil {
				return
			}
			var out struct{ TaskEvents event }
			_ = json.Unmarshal(m.Data, &out)
			ev := out.TaskEvents
			if ev.Kind == "LAGGED" {
				fastLagged.Store(true)
			}
			if last != 0 && ev.Seq != last+1 {
				msg := fmt.Sprintf("after seq %d came %d", last, ev.Seq)
				fastGap.CompareAndSwap(nil, &msg)
			}
			last = ev.Seq
			seen.Store(last)
		}
	}()
	var stats struct{ Stats struct{ LastSeq uint64 } }
	for i := 0; i < 100; i++ {
		b.submitMany(t, "load", 20)
		require.NoError(t, b.c.Do(ctx, `{ stats { lastSeq } }`, nil, &stats))
		waitfor.Eventually(t, "the fast subscriber keeps up", func() bool { return seen.Load() >= stats.Stats.LastSeq })
	}
	head := stats.Stats.LastSeq
	require.GreaterOrEqual(t, head, uint64(6000))
	require.False(t, fastLagged.Load(), "the fast subscriber never lagged")
	if p := fastGap.Load(); p != nil {
		t.Fatalf("the fast subscriber missed events: %s", *p)
	}

	// The slow one now reads: what was buffered, one LAGGED notice, then the
	// stream goes on right after the events it skipped.
	var lag *event
	var prev uint64
	for lag == nil {
		ev := nextEvent(t, ctx, slow)
		if ev.Kind == "LAGGED" {
			lag = &ev
			break
		}
		require.Greater(t, ev.Seq, prev)
		prev = ev.Seq
	}
	require.Positive(t, lag.Skipped)
	require.Equal(t, prev+lag.Skipped, lag.Seq, "the notice counts exactly the events skipped")
	require.Contains(t, lag.Reason, "fell behind")
	b.submit(t, "after-lag", nil)
	ev := nextEvent(t, ctx, slow)
	require.Equal(t, lag.Seq+1, ev.Seq, "after the notice, the stream continues without a gap")
}

func TestTaskEventFeedDeliversEncodedEventsAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed)
	ctx := ctxFor(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, `subscription { taskEventFeed(after: 0, max: 50, maxDelayMs: 5) { events count lastSeq } }`, nil)
	require.NoError(t, err)
	b.submitMany(t, "feed", 30)
	var seqs []uint64
	states := 0
	for states < 90 {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		var out struct {
			TaskEventFeed struct {
				Events  []map[string]any
				Count   int
				LastSeq uint64
			}
		}
		require.NoError(t, json.Unmarshal(m.Data, &out))
		f := out.TaskEventFeed
		require.Len(t, f.Events, f.Count)
		require.LessOrEqual(t, f.Count, 50)
		for _, e := range f.Events {
			seqs = append(seqs, uint64(e["seq"].(float64)))
			if e["kind"] == "BATCH" { // the batch's end, once its 30 tasks have
				require.NotEmpty(t, e["batchId"])
				continue
			}
			require.Equal(t, "STATE", e["kind"])
			require.Equal(t, "feed", e["agentId"])
			require.NotContains(t, e, "sessionKey", "null fields are left out")
			states++
		}
		require.Equal(t, seqs[len(seqs)-1], f.LastSeq)
	}
	for i, s := range seqs {
		require.Equal(t, uint64(i+1), s, "the feed has every event, in order")
	}
}

func TestSSEDeliversSubscriptionsAndAnswersQueries(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed)
	ctx := ctxFor(t)
	stream, err := b.c.SubscribeSSE(ctx, eventsQ, map[string]any{"filter": map[string]any{"agentId": "sse"}})
	require.NoError(t, err)
	defer stream.Close()
	b.waitSubscribed(t, "taskEvents", 1)
	id := b.submit(t, "sse", nil)
	for {
		m, err := stream.Next()
		require.NoError(t, err)
		var out struct{ TaskEvents event }
		require.NoError(t, json.Unmarshal(m.Data, &out))
		require.Equal(t, id, out.TaskEvents.TaskID)
		if out.TaskEvents.To == "SUCCEEDED" {
			break
		}
	}
	q, err := b.c.SubscribeSSE(ctx, `{ lanes { name } }`, nil)
	require.NoError(t, err)
	defer q.Close()
	m, err := q.Next()
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"main"`)
	_, err = q.Next()
	require.ErrorIs(t, err, io.EOF, "a query over SSE completes after its answer")
}

func TestTaskSubscriptionFollowsOneTaskUntilItEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	id := b.submit(t, "follow", nil)
	waitfor.Eventually(t, "the task runs", func() bool { return b.exec.Run(id) != nil })
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, `subscription($id: ID!) { task(id: $id) { id state result } }`, map[string]any{"id": id})
	require.NoError(t, err)
	type snap struct {
		Task struct {
			ID, State string
			Result    json.RawMessage
		}
	}
	read := func() snap {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		var s snap
		require.NoError(t, json.Unmarshal(m.Data, &s))
		return s
	}
	first := read()
	require.Equal(t, id, first.Task.ID)
	require.Equal(t, "ASSIGNED", first.Task.State, "the first message is the task as it stands")
	b.exec.Run(id).Started("inst", "tab")
	require.Equal(t, "RUNNING", read().Task.State)
	require.NoError(t, b.exec.Succeed(id, `{"done":1}`))
	last := read()
	require.Equal(t, "SUCCEEDED", last.Task.State)
	require.JSONEq(t, `{"done":1}`, string(last.Task.Result))
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, io.EOF, "the subscription completes once the task has ended")

	// A task that does not exist.
	sub2, err := conn.Subscribe(ctx, `subscription { task(id: "nope") { id } }`, nil)
	require.NoError(t, err)
	require.Equal(t, "NOT_FOUND", subscriptionError(t, ctx, sub2).Code())
}

func TestStatsSubscriptionTicksAtTheInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, `subscription { stats(intervalMs: 100) { at submitted } }`, nil)
	require.NoError(t, err)
	var ats []time.Time
	for len(ats) < 3 {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		var out struct{ Stats struct{ At time.Time } }
		require.NoError(t, json.Unmarshal(m.Data, &out))
		ats = append(ats, out.Stats.At)
	}
	require.True(t, ats[2].After(ats[0]))
	bad, err := conn.Subscribe(ctx, `subscription { stats(intervalMs: 5) { at } }`, nil)
	require.NoError(t, err)
	require.Equal(t, "INVALID_INPUT", subscriptionError(t, ctx, bad).Code())
}

func TestKeepalivesFlowOnBothSubprotocols(t *testing.T) {
	t.Parallel()
	// Not shorter: the server closes a connection whose pong is two
	// intervals late, which a busy machine under -race can make it.
	b := setup(t, func(o *setupOptions) { o.keepAlive = 500 * time.Millisecond })
	ctx := ctxFor(t)
	// A connection of each subprotocol, side by side: the intervals they
	// wait for pass for both at once.
	protos := []string{client.TransportWS, client.LegacyWS}
	conns := make([]*client.Conn, len(protos))
	for i, proto := range protos {
		conn, err := b.c.Dial(ctx, client.DialOptions{Protocol: proto})
		require.NoError(t, err)
		conns[i] = conn
	}
	for i, proto := range protos {
		waitfor.Eventually(t, proto+" keepalives arrive", func() bool { return conns[i].Pings.Load() >= 3 })
	}
	require.Equal(t, client.TransportWS, protos[0])
	require.NoError(t, conns[0].Ping(ctx))
	waitfor.Eventually(t, "the server answers a ping with a pong", func() bool { return conns[0].Pongs() >= 1 })
	// The client answers the server's pings: the server, which closes a
	// connection two intervals after a ping that got no pong, keeps each
	// one open for four more.
	seen := make([]int64, len(conns))
	for i, conn := range conns {
		seen[i] = conn.Pings.Load()
	}
	for i, proto := range protos {
		waitfor.Eventually(t, proto+" keepalives go on for four more intervals", func() bool { return conns[i].Pings.Load() >= seen[i]+4 })
	}
	for i, proto := range protos {
		require.NoError(t, conns[i].Err(), "%s connection alive", proto)
		require.NoError(t, conns[i].Close())
	}
	_ = engine.StateQueued
}
