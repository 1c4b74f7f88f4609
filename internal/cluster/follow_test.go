package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/graph/eventstream"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// followGate holds a follower's restarts of following: FollowBackoff
// reports each failure and waits until the test resumes it.
type followGate struct {
	failures chan int
	resume   chan struct{}
	release  func()
}

func newFollowGate(t *testing.T) *followGate {
	g := &followGate{failures: make(chan int, 64), resume: make(chan struct{})}
	g.release = sync.OnceFunc(func() { close(g.resume) })
	return g
}

func (g *followGate) backoff(failures int) time.Duration {
	select {
	case g.failures <- failures:
	default:
	}
	<-g.resume
	return 0
}

// stopped waits for the follower to report that following stopped.
func (g *followGate) stopped(t *testing.T) int {
	t.Helper()
	select {
	case n := <-g.failures:
		return n
	case <-time.After(time.Minute):
		t.Fatal("the follower's following never stopped")
		return 0
	}
}

// A follower whose replication of the leader's events fails (as on a gap
// in the seqs) is not ready while it does not follow, says why, and
// follows again by itself after its backoff: it sees the events committed
// meanwhile and later, and is ready again.
func TestAFollowerWhoseReplicationFailsFollowsAgain(t *testing.T) {
	gate := newFollowGate(t)
	f := newFleet(t, 2, 5*time.Millisecond, func(o *cluster.Options) { o.FollowBackoff = gate.backoff })
	t.Cleanup(gate.release) // before the fleet stops: a failing test does not hold the follower up
	lead := f.leader(f.nodes)
	fol := f.follower(lead)
	submitAndSeeEnd(t, lead, fol)
	require.NoError(t, fol.Ready())

	var refused atomic.Bool
	cluster.SetReplicate(fol.Node, func(e *engine.Engine, evs []engine.Event) error {
		if refused.CompareAndSwap(false, true) {
			return errors.New("engine: replicated events start at seq 9, after 5")
		}
		return e.Replicate(evs)
	})
	meanwhile := submitAndSeeEnd(t, lead, lead)
	require.Equal(t, 1, gate.stopped(t), "the first failure")
	err := fol.Ready()
	require.ErrorContains(t, err, "does not follow the leader's events")
	require.ErrorContains(t, err, "replicated events start at seq 9")
	require.NoError(t, lead.Ready(), "the leader is not concerned")

	gate.release()
	waitfor.Eventually(t, "the follower has the task that ended while it did not follow", func() bool {
		return terminalEvents(fol.Node)[meanwhile] == 1
	})
	submitAndSeeEnd(t, lead, fol)
	waitfor.Eventually(t, "the follower is ready again", func() bool { return fol.Ready() == nil })
}

// holdExec finishes every attempt at once, but those of agent "held",
// which wait until release is closed.
type holdExec struct {
	started chan string
	release chan struct{}
}

func (x *holdExec) Start(ctx context.Context, run *engine.Run) {
	go func() {
		if run.Spec().AgentID == "held" {
			x.started <- run.TaskID()
			select {
			case <-x.release:
			case <-ctx.Done():
				run.Finish(engine.Outcome{Err: context.Cause(ctx)})
				return
			}
		}
		run.Finish(engine.Outcome{Result: json.RawMessage(`{"ok":true}`)})
	}()
}

// A follower whose event log lags behind events the store has since purged
// (a task that ended while the follower did not follow, purged by
// retention) starts its standby engine again and follows: its log restarts
// at the store's position, and a subscriber resuming from where the log
// was gets every event the store still holds, in order, and a LAGGED
// notice for the purged ones, whether the gap starts the store's next page
// or lies inside it.
//
// The log restarts after the store's last seq when the standby engine
// starts, so an event committed while it restarts is in the log or only in
// the store, as the race goes: the subscriber gets it either way. Only an
// event committed once the follower follows again (it is ready) is
// certainly in the log.
func TestAFollowerBehindPurgedEventsFollowsAgain(t *testing.T) {
	for _, inPage := range []bool{false, true} {
		name := "gap at the page's start"
		if inPage {
			name = "gap inside the page"
		}
		t.Run(name, func(t *testing.T) { followBehindPurged(t, inPage) })
	}
}

func followBehindPurged(t *testing.T, inPage bool) {
	ctx := context.Background()
	gate := newFollowGate(t)
	exec := &holdExec{started: make(chan string, 1), release: make(chan struct{})}
	releaseHeld := sync.OnceFunc(func() { close(exec.release) })
	f := newFleet(t, 2, 0, func(o *cluster.Options) {
		o.FollowBackoff = gate.backoff
		store := o.Store
		o.NewEngine = func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Store: store, Executor: exec, Events: events})
		}
	})
	t.Cleanup(gate.release) // before the fleet stops: a failing test does not hold the follower up
	t.Cleanup(releaseHeld)
	lead := f.leader(f.nodes)
	fol := f.follower(lead)
	submitAndSeeEnd(t, lead, fol)
	from := fol.Events().Last()

	var refuse atomic.Bool
	refuse.Store(true)
	cluster.SetReplicate(fol.Node, func(e *engine.Engine, evs []engine.Event) error {
		if refuse.Load() {
			return errors.New("test: replication refused")
		}
		return e.Replicate(evs)
	})
	var held string
	if inPage { // the first events the follower lacks stay: a task under way
		_, err := lead.API().Submit(ctx, enginetest.Spec("held").Action("click").Obj())
		require.NoError(t, err)
		held = <-exec.started
	}
	purged := submitAndSeeEnd(t, lead, lead)
	gate.stopped(t)

	store, err := postgres.Open(ctx, postgres.Options{URL: pgtest.URL(t), Schema: f.schema, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	n, err := store.Purge(ctx, time.Now().Add(time.Hour), 1000) // every ended task
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 2)
	after := submitAndSeeEnd(t, lead, lead)
	if inPage {
		releaseHeld()
		waitfor.Eventually(t, "the held task ends on the leader", func() bool { return terminalEvents(lead.Node)[held] == 1 })
	}

	refuse.Store(false)
	gate.release()
	during := submitAndSeeEnd(t, lead, lead) // committed while the follower restarts
	waitfor.Eventually(t, "the follower is ready again", func() bool { return fol.Ready() == nil })
	later, err := lead.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.NoError(t, err)
	waitfor.Eventually(t, "the follower has the end of the task submitted once it follows again", func() bool {
		return heldEnds(fol.Node)[later.ID] == 1
	})
	require.Zero(t, heldEnds(fol.Node)[purged], "the purged task's events are gone")

	// The log holds no gap: its events continue one another.
	evs, missed := fol.Events().Read(from, 1<<16, nil)
	require.NotZero(t, missed, "the log restarted past the purged events")
	for i := range evs {
		require.Equal(t, evs[0].Seq+uint64(i), evs[i].Seq, "event %d of the log", i)
	}

	// A subscriber resuming from where the log was gets what the store holds.
	stored, err := store.Events(ctx, from, 1<<16)
	require.NoError(t, err)
	var want []uint64
	for _, e := range stored {
		want = append(want, e.Seq)
	}
	r := eventstream.NewReader(fol.Engine(), eventstream.Options{After: &from})
	var got []uint64
	ends := map[string]int{}
	var lagged []eventstream.Item
	for r.Position() < fol.Events().Last() {
		items, err := r.Poll(ctx, 1024)
		require.NoError(t, err)
		for _, it := range items {
			if it.Lagged > 0 {
				lagged = append(lagged, it)
				continue
			}
			require.NotEqual(t, purged, it.Event.TaskID)
			got = append(got, it.Event.Seq)
			if it.Event.Type == engine.EventState && it.Event.To.Terminal() {
				ends[it.Event.TaskID]++
			}
		}
	}
	require.Equal(t, want, got)
	ids := []string{after, during, later.ID}
	if inPage {
		ids = append(ids, held)
	}
	for _, id := range ids {
		require.Equal(t, 1, ends[id], "the end of task %s", id)
	}
	require.NotEmpty(t, lagged)
	for _, it := range lagged {
		require.Equal(t, eventstream.ReasonPurged, it.Reason)
	}
}

// heldEnds counts each task's events into a terminal state among those a
// node's event log holds (which need not start at the first event).
func heldEnds(n *cluster.Node) map[string]int {
	out := map[string]int{}
	evs, _ := n.Events().Read(0, 1<<20, nil)
	for _, e := range evs {
		if e.Type == engine.EventState && e.To.Terminal() {
			out[e.TaskID]++
		}
	}
	return out
}
