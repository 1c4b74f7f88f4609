package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/manager"
)

// fleetExec runs every attempt for a while and succeeds, on whichever node
// leads; it counts the attempts each task was given.
type fleetExec struct {
	delay time.Duration
	mu    sync.Mutex
	runs  map[string]int
}

func (x *fleetExec) Start(ctx context.Context, run *engine.Run) {
	x.mu.Lock()
	x.runs[run.TaskID()]++
	x.mu.Unlock()
	go func() {
		t := time.NewTimer(x.delay)
		defer t.Stop()
		select {
		case <-t.C:
			run.Finish(engine.Outcome{Result: json.RawMessage(`{"ok":true}`)})
		case <-ctx.Done():
			run.Finish(engine.Outcome{Err: context.Cause(ctx)})
		}
	}()
}

func (x *fleetExec) count(id string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.runs[id]
}

// testNode is one node of an in-process cluster, with a way to cut it off
// the database.
type testNode struct {
	*cluster.Node
	cut    *pgtest.Cutter
	cancel context.CancelFunc
}

type fleet struct {
	t      *testing.T
	schema string
	nodes  []*testNode
	exec   *fleetExec
}

func newFleet(t *testing.T, size int, delay time.Duration, adjust ...func(*cluster.Options)) *fleet {
	schema := pgtest.Schema(t)
	f := &fleet{t: t, schema: schema, exec: &fleetExec{delay: delay, runs: map[string]int{}}}
	for range size {
		f.add(adjust...)
	}
	return f
}

// add starts one more node, node-N for the fleet's Nth.
func (f *fleet) add(adjust ...func(*cluster.Options)) *testNode {
	t := f.t
	i := len(f.nodes)
	cut := &pgtest.Cutter{}
	store, err := postgres.Open(context.Background(), postgres.Options{URL: pgtest.URL(t), Schema: f.schema, MaxConns: 6,
		PollInterval: 300 * time.Millisecond, ConfigurePool: cut.Configure})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	opts := cluster.Options{
		Node: fmt.Sprintf("node-%d", i+1), Address: fmt.Sprintf("127.0.0.1:%d", 9000+i), Store: store,
		NewEngine: func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Store: store, Executor: f.exec, Events: events})
		},
		Lead: func(context.Context, *engine.Engine, func() error) (*cluster.Leadership, error) {
			return &cluster.Leadership{}, nil
		},
		TTL: 2 * time.Second, RenewEvery: 300 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
	}
	for _, f := range adjust {
		f(&opts)
	}
	n, err := cluster.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, n.Start(ctx))
	tn := &testNode{Node: n, cut: cut, cancel: cancel}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		tn.Stop(sctx)
		cancel()
	})
	f.nodes = append(f.nodes, tn)
	return tn
}

// leader waits for one node of live to lead and returns it.
func (f *fleet) leader(live []*testNode) *testNode {
	f.t.Helper()
	var found *testNode
	waitfor.Eventually(f.t, "one node leads", func() bool {
		found = nil
		for _, n := range live {
			if ok, _ := n.Leading(); ok {
				if found != nil {
					return false // two at once: wait for the old one to step down
				}
				found = n
			}
		}
		return found != nil
	})
	return found
}

// follower returns the node of a two-node fleet that is not lead.
func (f *fleet) follower(lead *testNode) *testNode {
	f.t.Helper()
	require.Len(f.t, f.nodes, 2, "follower is for a fleet of two")
	for _, n := range f.nodes {
		if n != lead {
			return n
		}
	}
	f.t.Fatalf("both nodes are %s", lead.ID())
	return nil
}

// terminalEvents counts each task's events into a terminal state in a
// node's event log, which holds every event from the first: the fleets
// start on an empty store, and a node's log continues without gaps
// whatever roles it takes.
func terminalEvents(n *cluster.Node) map[string]int {
	out := map[string]int{}
	evs, missed := n.Events().Read(0, 1<<20, nil)
	if missed > 0 {
		panic(fmt.Sprintf("the event log of %s lost events: %d before seq %d", n.ID(), missed, n.Events().Oldest()))
	}
	for _, e := range evs {
		if e.Type == engine.EventState && e.To.Terminal() {
			out[e.TaskID]++
		}
	}
	return out
}

func TestSubmitThroughEveryNode(t *testing.T) {
	f := newFleet(t, 3, 5*time.Millisecond)
	ctx := context.Background()
	lead := f.leader(f.nodes)

	var ids []string
	for i := range 30 {
		n := f.nodes[i%3]
		task, err := n.API().Submit(ctx, enginetest.Spec(fmt.Sprintf("agent-%d", i%4)).Action("click").Obj())
		require.NoError(t, err, "submit through %s", n.ID())
		require.NotEmpty(t, task.ID)
		ids = append(ids, task.ID)
	}
	res, err := f.nodes[(indexOf(f.nodes, lead)+1)%3].API().SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{
		{Key: "a", Spec: enginetest.Spec("batcher").Action("navigate").Obj()},
		{Key: "b", Spec: enginetest.Spec("batcher").Action("click").DependsOn("a").Obj()},
		{Key: "c", Spec: enginetest.Spec("").Action("click").Obj()}, // refused: no agent
	}})
	require.NoError(t, err)
	require.NotEmpty(t, res.BatchID)
	require.Len(t, res.Items, 3)
	require.NoError(t, res.Items[0].Err)
	require.NoError(t, res.Items[1].Err)
	require.Equal(t, []string{res.Items[0].Task.ID}, res.Items[1].Task.Spec.DependsOn)
	require.True(t, engine.IsCode(res.Items[2].Err, engine.CodeInvalidInput), "%v", res.Items[2].Err)
	require.Equal(t, []string{res.Items[0].Task.ID, res.Items[1].Task.ID, ""}, []string{res.Items[0].ID, res.Items[1].ID, res.Items[2].ID})
	ids = append(ids, res.Items[0].Task.ID, res.Items[1].Task.ID)

	// A follower's batch that asks for ids only gets them (the leader's
	// answer carries the tasks whatever the follower asked).
	res, err = f.nodes[(indexOf(f.nodes, lead)+1)%3].API().SubmitBatch(ctx, engine.BatchSpec{IDsOnly: true, Items: []engine.BatchItem{
		{Spec: enginetest.Spec("batcher").Action("click").Obj()},
	}})
	require.NoError(t, err)
	require.NoError(t, res.Items[0].Err)
	require.NotEmpty(t, res.Items[0].ID)
	ids = append(ids, res.Items[0].ID)

	// Every task succeeds, and every node's subscribers see every task end.
	waitfor.Eventually(t, "every node sees every task end once", func() bool {
		for _, n := range f.nodes {
			ends := terminalEvents(n.Node)
			for _, id := range ids {
				if ends[id] != 1 {
					return false
				}
			}
		}
		return true
	})
	for _, id := range ids {
		for _, n := range f.nodes {
			task, err := n.API().Task(ctx, id)
			require.NoError(t, err)
			require.Equal(t, engine.StateSucceeded, task.State, "task %s read through %s", id, n.ID())
		}
	}
	// The logs are the same on every node, seq for seq.
	want, _ := lead.Events().Read(0, 1<<20, nil)
	for _, n := range f.nodes {
		got, _ := n.Events().Read(0, 1<<20, nil)
		require.Equal(t, len(want), len(got), "events on %s", n.ID())
		for i := range want {
			require.Equal(t, want[i].Seq, got[i].Seq)
			require.Equal(t, want[i].TaskID, got[i].TaskID)
			require.Equal(t, want[i].To, got[i].To)
		}
	}

	// A change through a follower takes effect on the leader and shows
	// through every node.
	follower := f.nodes[(indexOf(f.nodes, lead)+2)%3]
	limit := 7
	_, err = follower.API().UpdateLane(ctx, "main", engine.LaneUpdate{MaxInFlight: &limit})
	require.NoError(t, err)
	for _, n := range f.nodes {
		l, err := n.API().Lane(ctx, "main")
		require.NoError(t, err)
		require.Equal(t, 7, l.Config.MaxInFlight, "through %s", n.ID())
	}
	_, err = follower.API().Cancel(ctx, "no-such-task", "test")
	require.True(t, engine.IsCode(err, engine.CodeNotFound), "a follower gets the leader's typed error: %v", err)
	st := follower.API().Stats(ctx)
	require.Equal(t, uint64(len(ids)), st.Submitted, "a follower reports the leader's stats")

	nodes, err := follower.Nodes(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 3)
	leaders := 0
	for _, n := range nodes {
		require.True(t, n.Healthy, "node %s", n.ID)
		if n.Leader {
			leaders++
			require.Equal(t, lead.ID(), n.ID)
		}
	}
	require.Equal(t, 1, leaders)
}

func TestFailoverReclaimsAndLosesNothing(t *testing.T) {
	f := newFleet(t, 3, 150*time.Millisecond)
	ctx := context.Background()
	old := f.leader(f.nodes)
	var live []*testNode
	for _, n := range f.nodes {
		if n != old {
			live = append(live, n)
		}
	}

	var ids []string
	for i := range 60 {
		task, err := live[i%2].API().Submit(ctx, enginetest.Spec(fmt.Sprintf("agent-%d", i%5)).Action("click").Obj())
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	// Some are running on the old leader when it is cut off the database.
	waitfor.Eventually(t, "the leader has attempts in flight", func() bool { return old.API().Stats(ctx).InFlight > 0 })
	cutAt := time.Now()
	old.cut.Partition()

	// It steps down before its lease can be taken; another node leads.
	waitfor.Eventually(t, "the cut-off leader steps down", func() bool { ok, _ := old.Leading(); return !ok })
	next := f.leader(live)
	took := time.Since(cutAt)
	t.Logf("failover: %s took over from %s in %s", next.ID(), old.ID(), took.Round(time.Millisecond))
	// TTL and a renewal (2.6 s here) and the new leader's start, which on a
	// busy two-core machine can take seconds: the bound allows 6 s for it.
	require.Less(t, took, 2*time.Second+2*300*time.Millisecond+6*time.Second, "TTL + renewal + start-up")

	// Every task ends exactly once, in SUCCEEDED; the ones the old leader
	// was running were interrupted and ran again.
	waitfor.Eventually(t, "the live nodes see every task end", func() bool {
		for _, n := range live {
			ends := terminalEvents(n.Node)
			for _, id := range ids {
				if ends[id] == 0 {
					return false
				}
			}
		}
		return true
	})
	rerun := 0
	for _, n := range live {
		ends := terminalEvents(n.Node)
		for _, id := range ids {
			require.Equal(t, 1, ends[id], "task %s ended once", id)
		}
	}
	for _, id := range ids {
		task, err := next.API().Task(ctx, id)
		require.NoError(t, err)
		require.Equal(t, engine.StateSucceeded, task.State, "task %s", id)
		if f.exec.count(id) > 1 {
			rerun++
			require.GreaterOrEqual(t, len(task.Attempts), 2, "a re-run task records the interrupted attempt")
			require.Equal(t, "interrupted: the leader changed (node "+next.ID()+" took over)", task.Attempts[0].Error,
				"the interrupted attempt says what happened")
		}
	}
	t.Logf("%d of %d tasks ran again after the failover", rerun, len(ids))

	// The old leader, back on the network, follows.
	old.cut.Heal()
	waitfor.Eventually(t, "the old leader follows the new one's events", func() bool {
		want := next.Events().Last()
		return old.Events().Last() >= want
	})
	ok, _ := old.Leading()
	require.False(t, ok)
}

func indexOf(nodes []*testNode, n *testNode) int {
	for i, x := range nodes {
		if x == n {
			return i
		}
	}
	return -1
}

// The nodes query derives role and leader from the lease alone: they agree
// in every read, from the election through a failover, and the cut-off
// leader, whose last report still says it leads, shows as a follower that is
// neither leading nor healthy.
func TestNodesNeverShowARoleThatContradictsTheLease(t *testing.T) {
	f := newFleet(t, 2, 5*time.Millisecond)
	watcher := f.nodes[1]
	var (
		mu         sync.Mutex
		violations []string // the first few
		wrong      int
		reads      int
	)
	check := func(ns []cluster.NodeStatus) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		leaders, bad := 0, false
		for _, s := range ns {
			bad = bad || (s.Role == cluster.RoleLeader) != s.Leader
			if s.Leader {
				leaders++
			}
		}
		if bad || leaders > 1 {
			wrong++
			if len(violations) < 3 {
				violations = append(violations, fmt.Sprintf("%+v", ns))
			}
		}
	}
	wctx, stopWatching := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(5 * time.Millisecond) // pacing on a busy machine, not a claim
		defer tick.Stop()
		for {
			if ns, err := watcher.Nodes(wctx); err == nil {
				check(ns)
			}
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { stopWatching(); <-watched }()

	old := f.leader(f.nodes)
	var live []*testNode
	for _, n := range f.nodes {
		if n != old {
			live = append(live, n)
		}
	}
	old.cut.Partition()
	next := f.leader(live)
	waitfor.CheckFor(t, func() error {
		ns, err := next.Nodes(context.Background())
		if err != nil {
			return err
		}
		var sawOld, sawNext bool
		for _, s := range ns {
			switch s.ID {
			case old.ID():
				sawOld = s.Role == cluster.RoleFollower && !s.Leader && !s.Healthy
			case next.ID():
				sawNext = s.Role == cluster.RoleLeader && s.Leader && s.Healthy
			}
		}
		if len(ns) != 2 || !sawOld || !sawNext {
			return fmt.Errorf("the cut-off leader does not show as an unhealthy follower beside the new leader: %+v", ns)
		}
		return nil
	})

	stopWatching()
	<-watched
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, reads)
	require.Zero(t, wrong, "role and leader disagreed in %d of %d reads, as in %v", wrong, reads, violations)
}

// TestTheCallersContextBoundsTheForward: a follower's call to a leader that
// does not answer ends when the caller's context does, not after the node's
// call timeout (here far longer than the test).
func TestTheCallersContextBoundsTheForward(t *testing.T) {
	f := newFleet(t, 2, time.Millisecond, func(o *cluster.Options) {
		o.CallTimeout = 10 * time.Minute
		o.TTL = 10 * time.Minute // the follower cannot take over while the test runs
	})
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	lead.cut.Partition() // it reads no more commands
	t.Cleanup(lead.cut.Heal)

	limit := 3
	calls := map[string]func(ctx context.Context) error{
		"UpdateLane": func(ctx context.Context) error {
			_, err := follower.API().UpdateLane(ctx, "main", engine.LaneUpdate{MaxInFlight: &limit})
			return err
		},
		"SetAgent": func(ctx context.Context) error {
			return follower.API().SetAgent(ctx, "a", engine.AgentConfig{Weight: 2})
		},
		"Plan": func(ctx context.Context) error {
			_, err := follower.API().Plan(ctx, 10)
			return err
		},
		"Instances.Remove": func(ctx context.Context) error {
			return follower.Instances().Remove(ctx, "nobody")
		},
		"Plugins.Enable": func(ctx context.Context) error {
			return follower.Plugins().Enable(ctx, "nobody", false)
		},
		"Plugins.Get": func(ctx context.Context) error {
			_, err := follower.Plugins().Get(ctx, "nobody")
			return err
		},
		"Schedules.Get": func(ctx context.Context) error {
			_, err := follower.Schedules().Get(ctx, "nobody")
			return err
		},
		"Heartbeats.Get": func(ctx context.Context) error {
			_, err := follower.Heartbeats().Get(ctx, "nobody")
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		select {
		case err := <-done:
			require.True(t, engine.IsCode(err, engine.CodeUnavailable), "%s: %v", name, err)
		case <-time.After(time.Minute):
			t.Fatalf("%s still waits for the leader a minute after its context ended", name)
		}
		cancel()
	}
	// A list of the leader's plugins ends when its caller cancels it (a
	// context with no deadline, cancelled while the forward waits), empty
	// since the follower has no view of its own, not at the call timeout.
	listCtx, cancelList := context.WithCancel(context.Background())
	defer cancelList()
	time.AfterFunc(100*time.Millisecond, cancelList)
	plugins := make(chan []manager.Info, 1)
	go func() { plugins <- follower.Plugins().List(listCtx) }()
	select {
	case is := <-plugins:
		require.Empty(t, is, "no leader answered")
	case <-time.After(time.Minute):
		t.Fatal("Plugins.List still waits for the leader a minute after its context was cancelled")
	}
	// A polled read falls back to this node's view when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan []engine.LaneStatus, 1)
	go func() { done <- follower.API().Lanes(ctx) }()
	select {
	case ls := <-done:
		require.NotEmpty(t, ls, "the follower's own view of the lanes")
	case <-time.After(time.Minute):
		t.Fatal("Lanes still waits for the leader a minute after its context ended")
	}
}

// A stopped leader has released its lease by the time Stop returns, so a
// process that exits right after it (its connections cut, as the partition
// here cuts them) leaves the next leader nothing to wait for: with a lease
// of ten minutes, the other node takes over at once.
func TestAStoppedLeaderHasReleasedItsLease(t *testing.T) {
	f := newFleet(t, 2, 0, func(o *cluster.Options) { o.TTL = 10 * time.Minute })
	lead := f.leader(f.nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead.Stop(ctx)
	lead.cut.Partition() // the process exits

	c, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer c.Close(ctx) //nolint:errcheck
	var held bool
	require.NoError(t, c.QueryRow(ctx, "SELECT coalesce(bool_or(expires_at > now()), false) FROM "+pgx.Identifier{f.schema}.Sanitize()+
		".leases WHERE node = $1", lead.ID()).Scan(&held))
	require.False(t, held, "the stopped node's lease is released when Stop returns")
	other := f.follower(lead)
	require.Same(t, other, f.leader([]*testNode{other}))
}

// A keyed submission says whether it was a replay through a follower as on
// the leader: the leader's engine answers, and the answer comes back with
// the task. The first submission records the task; the same request again,
// through either node, is a replay of it; another request under the key is
// refused with CONFLICT naming it. Identical submissions at the same
// instant, through both nodes, record one task: exactly one of them says
// so. The tasks run until the nodes stop: they stay in the leader's memory.
func TestAFollowerSaysWhetherAKeyedSubmissionWasReplayed(t *testing.T) {
	f := newFleet(t, 2, time.Hour)
	ctx := context.Background()
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	spec := enginetest.Spec("agent").Action("click").Idempotency("K1").Obj()

	first, err := follower.API().SubmitItem(ctx, spec)
	require.NoError(t, err)
	require.False(t, first.Replayed, "the first submission recorded the task")
	require.NotEmpty(t, first.ID)
	require.Equal(t, first.ID, first.Task.ID)

	for _, n := range []*testNode{follower, lead} {
		again, err := n.API().SubmitItem(ctx, spec)
		require.NoError(t, err, "through %s", n.ID())
		require.True(t, again.Replayed, "through %s", n.ID())
		require.Equal(t, first.ID, again.ID, "through %s", n.ID())
	}

	other := enginetest.Spec("agent").Action("navigate").Params(map[string]any{"url": "https://example.com"}).Idempotency("K1").Obj()
	res, err := follower.API().SubmitItem(ctx, other)
	require.True(t, engine.IsCode(err, engine.CodeConflict), "%v", err)
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, first.ID, ee.TaskID)
	require.Equal(t, "idempotencyKey", ee.Field)
	require.False(t, res.Replayed)
	require.Nil(t, res.Task)

	const calls = 8
	racing := enginetest.Spec("agent").Action("click").Idempotency("K2").Obj()
	results := make([]engine.ItemResult, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			results[i], errs[i] = f.nodes[i%2].API().SubmitItem(ctx, racing)
		})
	}
	wg.Wait()
	submitted := 0
	for i := range calls {
		require.NoError(t, errs[i], "call %d", i)
		require.Equal(t, results[0].ID, results[i].ID, "call %d", i)
		if !results[i].Replayed {
			submitted++
		}
	}
	require.Equal(t, 1, submitted, "exactly one of the identical submissions recorded the task")
	require.Equal(t, uint64(2), follower.API().Stats(ctx).Submitted)
	for _, id := range []string{first.ID, results[0].ID} {
		_, err := follower.API().Cancel(ctx, id, "the test is over")
		require.NoError(t, err)
	}
}
