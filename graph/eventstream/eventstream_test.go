package eventstream_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/eventstream"
)

// newEngine starts a synchronous engine whose attempts succeed at once,
// with a ring of ringSize events and a store that keeps storeSize.
func newEngine(t *testing.T, ringSize, storeSize int) *engine.Engine {
	t.Helper()
	exec := enginetest.NewExecutor()
	exec.Auto = func(*engine.Run) engine.Outcome { return engine.Outcome{} }
	e, err := engine.New(enginetest.Synchronous(engine.Options{
		Config: engine.Config{EventBuffer: ringSize}, Store: memory.New(memory.Options{MaxEvents: storeSize}),
		Executor: exec, Clock: clock.NewFake(enginetest.Epoch), Seed: 1,
	}))
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return e
}

func submit(t *testing.T, e *engine.Engine, agent string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := e.Submit(context.Background(), enginetest.Spec(agent).Obj())
		require.NoError(t, err)
	}
}

func ptr(v uint64) *uint64 { return &v }

// drain reads everything available now.
func drain(t *testing.T, r *eventstream.Reader) []eventstream.Item {
	t.Helper()
	var out []eventstream.Item
	for {
		items, err := r.Poll(context.Background(), 1000)
		require.NoError(t, err)
		if len(items) == 0 {
			return out
		}
		out = append(out, items...)
	}
}

func TestAReaderWithoutAfterStartsWithTheNextEvent(t *testing.T) {
	t.Parallel()
	e := newEngine(t, 1024, 1024)
	submit(t, e, "a", 3)
	r := eventstream.NewReader(e, eventstream.Options{})
	require.Empty(t, drain(t, r))
	submit(t, e, "a", 1)
	items := drain(t, r)
	require.Len(t, items, 3, "QUEUED, ASSIGNED, SUCCEEDED")
	require.Equal(t, e.Events().Last(), items[2].Event.Seq)
}

func TestAReaderResumesAfterASeqWithoutGapsAndFilters(t *testing.T) {
	t.Parallel()
	e := newEngine(t, 1024, 1024)
	submit(t, e, "a", 2)
	submit(t, e, "b", 2)
	r := eventstream.NewReader(e, eventstream.Options{After: ptr(2)})
	items := drain(t, r)
	require.Len(t, items, int(e.Events().Last())-2)
	for i, it := range items {
		require.Equal(t, uint64(3+i), it.Event.Seq)
		require.Zero(t, it.Lagged)
	}
	only := eventstream.NewReader(e, eventstream.Options{After: ptr(0), Match: func(ev *engine.Event) bool { return ev.AgentID == "b" }})
	items = drain(t, only)
	require.Len(t, items, 6)
	for _, it := range items {
		require.Equal(t, "b", it.Event.AgentID)
	}
	require.Equal(t, e.Events().Last(), only.Position(), "filtered events are consumed too")
}

func TestAReaderFallingBehindItsBudgetIsSkippedToTheHeadWithOneLaggedItem(t *testing.T) {
	t.Parallel()
	e := newEngine(t, 1024, 1024)
	r := eventstream.NewReader(e, eventstream.Options{MaxLag: 10})
	submit(t, e, "a", 2) // 6 events: within the budget
	require.Len(t, drain(t, r), 6)
	submit(t, e, "a", 20) // 60 events: beyond it
	items := drain(t, r)
	require.Len(t, items, 1)
	require.Equal(t, uint64(60), items[0].Lagged)
	require.Equal(t, e.Events().Last(), items[0].Event.Seq)
	require.Equal(t, eventstream.ReasonSlow, items[0].Reason)
	require.Equal(t, uint64(60), r.Lagged())
	submit(t, e, "a", 1)
	items = drain(t, r)
	require.Len(t, items, 3, "after the skip the reader follows the stream again")
}

func TestResumingBeforeTheRingReplaysFromTheStore(t *testing.T) {
	t.Parallel()
	e := newEngine(t, 16, 100_000)
	submit(t, e, "a", 30) // 90 events, the ring keeps 16
	require.Greater(t, e.Events().Oldest(), uint64(50))
	r := eventstream.NewReader(e, eventstream.Options{After: ptr(0), Batch: 7})
	items := drain(t, r)
	require.Len(t, items, 90)
	for i, it := range items {
		require.Equal(t, uint64(i+1), it.Event.Seq, "every event, from the store then the ring")
	}
}

func TestResumingBeforeEverythingKeptSaysHowManyEventsAreGone(t *testing.T) {
	t.Parallel()
	e := newEngine(t, 16, 40)
	submit(t, e, "a", 30) // 90 events; the store keeps 40, the ring 16
	r := eventstream.NewReader(e, eventstream.Options{After: ptr(5)})
	items := drain(t, r)
	require.NotEmpty(t, items)
	lag := items[0]
	require.Equal(t, uint64(90-40-5), lag.Lagged, "events 6..50 are gone")
	require.Equal(t, uint64(50), lag.Event.Seq)
	require.Equal(t, eventstream.ReasonPurged, lag.Reason)
	require.Len(t, items[1:], 40)
	for i, it := range items[1:] {
		require.Equal(t, uint64(51+i), it.Event.Seq)
	}
}

func TestNextWaitsForEventsThroughTheHub(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, 1024, 1024)
		hub := eventstream.NewHub(e.Events())
		defer hub.Close()
		readers := make([]*eventstream.Reader, 50)
		got := make(chan uint64, len(readers))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := range readers {
			readers[i] = eventstream.NewReader(e, eventstream.Options{Hub: hub})
			go func(r *eventstream.Reader) {
				items, err := r.Next(ctx, 1)
				if err != nil {
					got <- 0
					return
				}
				got <- items[0].Event.Seq
			}(readers[i])
		}
		synctest.Wait() // every reader waits on the hub
		require.Empty(t, got, "a reader returned before there was an event")
		submit(t, e, "a", 1)
		for range readers {
			require.Equal(t, uint64(1), <-got, "every waiting reader wakes with the first event")
		}
	})
}

func TestAppendEventWritesTheTaskEventFieldsAsJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC)
	ev := engine.Event{Seq: 42, At: at, Type: engine.EventState, TaskID: "t1", AgentID: "a\"<b>", Lane: "main",
		BatchID: "b1", From: engine.StateQueued, To: engine.StateAssigned, Attempt: 1, Reason: "dispatched\n"}
	var got map[string]any
	require.NoError(t, json.Unmarshal(eventstream.AppendEvent(nil, &ev), &got))
	require.Equal(t, map[string]any{
		"seq": float64(42), "kind": "STATE", "at": "2026-03-02T09:00:00.123456789Z", "taskId": "t1", "agentId": "a\"<b>",
		"lane": "main", "batchId": "b1", "from": "QUEUED", "to": "ASSIGNED", "attempt": float64(1), "reason": "dispatched\n",
	}, got)
	lag := eventstream.Item{Event: engine.Event{Seq: 9, At: at}, Lagged: 7, Reason: eventstream.ReasonSlow}
	require.NoError(t, json.Unmarshal(eventstream.AppendLagged(nil, &lag), &got))
	require.Equal(t, "LAGGED", got["kind"])
	require.Equal(t, float64(7), got["skipped"])
}

func TestEncodedSharesOneEncodingPerEvent(t *testing.T) {
	t.Parallel()
	c := eventstream.NewEncoded(8)
	ev := engine.Event{Seq: 3, Type: engine.EventState, TaskID: "x", To: engine.StateQueued}
	a := c.Get(&ev)
	b := c.Get(&ev)
	require.Equal(t, &a[0], &b[0], "the second subscriber gets the same bytes")
	other := engine.Event{Seq: 11, Type: engine.EventState, TaskID: "y"} // same slot
	require.Contains(t, string(c.Get(&other)), `"taskId":"y"`)
	require.Contains(t, string(c.Get(&ev)), `"taskId":"x"`, "an evicted event is encoded again")
}

// purgedSource is an engine whose store lacks some seqs, as retention
// leaves it.
type purgedSource struct {
	*engine.Engine
	gone map[uint64]bool
}

func (s purgedSource) StoredEvents(ctx context.Context, after uint64, limit int) ([]engine.Event, error) {
	evs, err := s.Engine.StoredEvents(ctx, after, limit)
	kept := evs[:0]
	for _, e := range evs {
		if !s.gone[e.Seq] {
			kept = append(kept, e)
		}
	}
	return kept, err
}

func TestAReplayTellsOfPurgedEventsInsideAPage(t *testing.T) {
	t.Parallel()
	e := newEngine(t, 16, 100_000)
	submit(t, e, "a", 30) // 90 events, the ring keeps 16
	src := purgedSource{Engine: e, gone: map[uint64]bool{10: true, 11: true, 12: true}}
	r := eventstream.NewReader(src, eventstream.Options{After: ptr(0), Batch: 50})
	items := drain(t, r)
	require.Len(t, items, 90-3+1)
	for i, it := range items[:9] {
		require.Zero(t, it.Lagged)
		require.Equal(t, uint64(i+1), it.Event.Seq)
	}
	lag := items[9]
	require.Equal(t, uint64(3), lag.Lagged, "events 10..12 are gone")
	require.Equal(t, uint64(12), lag.Event.Seq)
	require.Equal(t, eventstream.ReasonPurged, lag.Reason)
	for i, it := range items[10:] {
		require.Zero(t, it.Lagged)
		require.Equal(t, uint64(13+i), it.Event.Seq)
	}
}
