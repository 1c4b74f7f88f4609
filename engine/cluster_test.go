package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// fencing is a memory store that can refuse commits as a fenced store does
// once another node has taken the lease.
type fencing struct {
	*memory.Store
	fenced atomic.Bool
}

func (f *fencing) Commit(ctx context.Context, b *engine.Batch) error {
	if f.fenced.Load() {
		return errors.Join(engine.ErrFenced, errors.New("epoch 2 is held by node-b"))
	}
	return f.Store.Commit(ctx, b)
}

func TestAFencedLeaderStopsAndCancelsItsAttempts(t *testing.T) {
	t.Parallel()
	store := &fencing{Store: memory.New(memory.Options{})}
	x := enginetest.NewExecutor()
	e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: x, Clock: clock.NewFake(enginetest.Epoch)}))
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	running, err := e.Submit(context.Background(), enginetest.Spec("a").Obj())
	require.NoError(t, err)
	ctx := x.Context(running.ID)

	store.fenced.Store(true)
	_, _ = e.Submit(context.Background(), enginetest.Spec("a").Obj()) // its commit is refused
	waitfor.Eventually(t, "the engine knows it is fenced", e.Fenced)
	waitfor.Eventually(t, "the attempt under way is cancelled: the next leader reclaims it", func() bool { return ctx.Err() != nil })
	_, err = e.Submit(context.Background(), enginetest.Spec("a").Obj())
	require.True(t, engine.IsCode(err, engine.CodeDraining), "an abandoned engine refuses work: %v", err)
}

func TestAStandbyEngineCarriesTheLeadersEvents(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	leader, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: enginetest.NewExecutor()}))
	require.NoError(t, err)
	require.NoError(t, leader.Start(context.Background()))
	first, err := leader.Submit(context.Background(), enginetest.Spec("a").Obj())
	require.NoError(t, err)

	follower, err := engine.New(engine.Options{Store: store, Executor: enginetest.NewExecutor()})
	require.NoError(t, err)
	require.NoError(t, follower.StartStandby(context.Background()))
	require.True(t, follower.Standby())
	got, err := follower.Task(context.Background(), first.ID)
	require.NoError(t, err, "a follower reads tasks from the store")
	require.Equal(t, first.ID, got.ID)
	base := follower.Events().Last()

	_, err = leader.Submit(context.Background(), enginetest.Spec("b").Obj())
	require.NoError(t, err)
	evs, err := store.Events(context.Background(), base, 100)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	require.NoError(t, follower.Replicate(evs))
	require.NoError(t, follower.Replicate(evs), "events it holds already are skipped")
	require.Equal(t, leader.Events().Last(), follower.Events().Last())
	require.Error(t, follower.Replicate([]engine.Event{{Seq: follower.Events().Last() + 5}}), "a gap is refused")
}

func TestIngestKeepsTheAcceptingNodesIdsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	in := engine.Inbound{BatchID: "B-from-follower", Batch: &engine.BatchSpec{Parallelism: 1},
		Items: []engine.BatchItem{{ID: "T-follower-1", Spec: enginetest.Spec("a").Obj()}, {ID: "T-follower-2", Spec: enginetest.Spec("a").Obj()}}}
	res, err := h.Ingest(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "B-from-follower", res.BatchID)
	require.Equal(t, "T-follower-1", res.Items[0].Task.ID)
	again, err := h.Ingest(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, "T-follower-2", again.Items[1].Task.ID)
	require.EqualValues(t, 2, h.Stats(context.Background()).Submitted, "ingesting twice admits once")
	_, err = h.Ingest(context.Background(), engine.Inbound{Items: []engine.BatchItem{{Spec: enginetest.Spec("a").Obj()}}})
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput))
}

// behind is a store whose snapshot lags its events, as a shared store's
// does when the leader commits between a follower's Load and its reads.
type behind struct {
	*memory.Store
	lag uint64
}

func (b *behind) Load(ctx context.Context) (*engine.Snapshot, error) {
	snap, err := b.Store.Load(ctx)
	if err == nil {
		snap.LastSeq -= b.lag
	}
	return snap, err
}

func TestAStandbyCatchesItsLogUpToTheSnapshotWhileTheLeaderGoesOn(t *testing.T) {
	t.Parallel()
	mem := memory.New(memory.Options{})
	leader, err := engine.New(enginetest.Synchronous(engine.Options{Store: mem, Executor: enginetest.NewExecutor()}))
	require.NoError(t, err)
	require.NoError(t, leader.Start(context.Background()))
	for range 5 {
		_, err := leader.Submit(context.Background(), enginetest.Spec("a").Obj())
		require.NoError(t, err)
	}
	last := leader.Events().Last()

	// A node's log that holds the first event only (a standby that saw
	// the store empty, then replicated one event)…
	log := engine.NewEventLog(64)
	early, err := engine.New(engine.Options{Store: &behind{Store: mem, lag: last}, Executor: enginetest.NewExecutor(), Events: log})
	require.NoError(t, err)
	require.NoError(t, early.StartStandby(context.Background()))
	first, err := mem.Events(context.Background(), 0, 1)
	require.NoError(t, err)
	require.NoError(t, early.Replicate(first))

	// …continued by a standby whose snapshot says two events fewer than
	// the store holds by the time it reads them.
	follower, err := engine.New(engine.Options{Store: &behind{Store: mem, lag: 2}, Executor: enginetest.NewExecutor(), Events: log})
	require.NoError(t, err)
	require.NoError(t, follower.StartStandby(context.Background()),
		"events past the snapshot are left to following, not an error")
	require.Equal(t, last-2, log.Last())
}

// A node's log that a standby took up while the store was empty, and that
// holds no event yet (the node stepped down before it replicated any), is
// caught up from the first event by the next engine given it: it is not
// moved past what the leader committed meanwhile, which its readers,
// waiting after seq 0, would never see in it.
func TestAnEmptyLogAStandbyTookUpIsCaughtUpFromTheFirstEvent(t *testing.T) {
	t.Parallel()
	mem := memory.New(memory.Options{})
	log := engine.NewEventLog(64)
	early, err := engine.New(engine.Options{Store: mem, Executor: enginetest.NewExecutor(), Events: log})
	require.NoError(t, err)
	require.NoError(t, early.StartStandby(context.Background()))
	require.Zero(t, log.Last())

	leader, err := engine.New(enginetest.Synchronous(engine.Options{Store: mem, Executor: enginetest.NewExecutor()}))
	require.NoError(t, err)
	require.NoError(t, leader.Start(context.Background()))
	for range 3 {
		_, err := leader.Submit(context.Background(), enginetest.Spec("a").Obj())
		require.NoError(t, err)
	}
	want, _ := leader.Events().Read(0, 100, nil)
	require.NotEmpty(t, want)

	again, err := engine.New(engine.Options{Store: mem, Executor: enginetest.NewExecutor(), Events: log})
	require.NoError(t, err)
	require.NoError(t, again.StartStandby(context.Background()))
	got, missed := log.Read(0, 100, nil)
	require.Zero(t, missed, "the log lost no event")
	require.Equal(t, want, got)
	require.EqualValues(t, 1, log.Oldest())
}

// A lane stored with a maximum depth past MaxSpawnDepth (possible before it
// was bounded) does not stop the engine from starting: it is lowered to it.
func TestAStoredLaneDeeperThanTheBoundIsLoweredToIt(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	deep := engine.DefaultLanes()[0]
	deep.Name, deep.MaxDepth = "deep", 50_000
	require.NoError(t, store.Commit(context.Background(), &engine.Batch{Lanes: []engine.LaneConfig{deep}}))
	e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: enginetest.NewExecutor()}))
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	for _, l := range e.Lanes(context.Background()) {
		if l.Config.Name == "deep" {
			require.Equal(t, engine.MaxSpawnDepth, l.Config.MaxDepth)
			return
		}
	}
	t.Fatal("the stored lane was not restored")
}
