package cluster_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// takeovers records a node's attempts to start leading and the backoffs it
// asked for after the failed ones.
type takeovers struct {
	mu       sync.Mutex
	at       []time.Time // when Lead was called, one per takeover
	failures []int       // what TakeoverBackoff was given
}

func (r *takeovers) lead() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, time.Now())
	return len(r.at)
}

func (r *takeovers) backoff(failures int, d time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, failures)
	return d
}

func (r *takeovers) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.at)
}

func (r *takeovers) list() ([]time.Time, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...), append([]int(nil), r.failures...)
}

// submitAndSeeEnd submits a task through via and waits until every node of
// watchers has its end in its event log.
func submitAndSeeEnd(t *testing.T, via *testNode, watchers ...*testNode) string {
	t.Helper()
	task, err := via.API().Submit(context.Background(), enginetest.Spec("agent").Action("click").Obj())
	require.NoError(t, err, "submit through %s", via.ID())
	for _, w := range watchers {
		waitfor.Eventually(t, "the end of task "+task.ID+" is in the event log of "+w.ID(), func() bool {
			return terminalEvents(w.Node)[task.ID] == 1
		})
	}
	return task.ID
}

// A node whose takeover fails (here its Lead, as when the plugin store does
// not answer in time) steps down instead of leaving the cluster: it releases
// the lease at once — the lease lasts ten minutes, so the other node can
// only lead because it was released —, follows the new leader's events, and
// takes over, successfully, when that leader stops.
func TestANodeThatFailsToTakeOverStepsDownFollowsAndLeadsLater(t *testing.T) {
	var rec takeovers
	second := make(chan struct{}) // closed once node-2 runs
	f := newFleet(t, 1, 5*time.Millisecond, func(o *cluster.Options) {
		o.TTL = 10 * time.Minute
		// Long enough for node-2 to take the released lease first, on a
		// busy machine; short enough to wait out at the end.
		o.TakeoverBackoff = func(failures int) time.Duration { return rec.backoff(failures, 8*time.Second) }
		o.Lead = func(ctx context.Context, _ *engine.Engine, start func() error) (*cluster.Leadership, error) {
			if rec.lead() == 1 {
				select {
				case <-second:
				case <-ctx.Done():
				}
				return nil, errors.New("read the plugin store: timeout")
			}
			return &cluster.Leadership{}, start()
		}
	})
	first := f.nodes[0]
	waitfor.Eventually(t, "node-1 takes the lease and starts its takeover", func() bool { return rec.count() == 1 })
	next := f.add(func(o *cluster.Options) { o.TTL = 10 * time.Minute })
	close(second)

	// (1) The lease was released: node-2 leads well within its TTL.
	require.Same(t, next, f.leader(f.nodes))
	holder, _, held, err := next.Leader(context.Background())
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, next.ID(), holder)
	ok, _ := first.Leading()
	require.False(t, ok)

	// (2) node-1 follows: what node-2 commits reaches node-1's event log,
	// whether submitted through node-2 or through node-1.
	submitAndSeeEnd(t, next, first)
	submitAndSeeEnd(t, first, first, next)
	require.Equal(t, next.Events().Last(), first.Events().Last(), "node-1's log has caught up with the leader's")

	// (3) node-2 stops (and releases the lease): node-1 campaigns again,
	// after its backoff, and now leads.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next.Stop(sctx)
	require.Same(t, first, f.leader([]*testNode{first}))
	submitAndSeeEnd(t, first, first)
	require.Equal(t, 2, rec.count(), "one failed takeover, one that led")
	_, failures := rec.list()
	require.Equal(t, []int{1}, failures)
}

// A node whose every takeover fails does not keep the lease and does not
// take it over and over: between two of its attempts lies at least the
// backoff it asked for after the first of them (a timer never fires early,
// so a busy machine can only make the spacing larger), and the count of
// failures in a row grows. Its lease lasts ten minutes, so each new attempt
// shows that the one before released the lease; and a second node, once
// there, leads.
func TestANodeWhoseTakeoversAlwaysFailBacksOff(t *testing.T) {
	var rec takeovers
	backoff := func(failures int) time.Duration { return time.Duration(failures) * 150 * time.Millisecond }
	f := newFleet(t, 1, 5*time.Millisecond, func(o *cluster.Options) {
		o.TTL = 10 * time.Minute
		o.TakeoverBackoff = func(failures int) time.Duration { return rec.backoff(failures, backoff(failures)) }
		o.Lead = func(context.Context, *engine.Engine, func() error) (*cluster.Leadership, error) {
			rec.lead()
			return nil, errors.New("the plugin host did not start")
		}
	})
	first := f.nodes[0]
	waitfor.Eventually(t, "node-1 tries to lead four times", func() bool { return rec.count() >= 4 })
	at, failures := rec.list()
	require.Equal(t, []int{1, 2, 3}, failures[:3], "the failures in a row are counted")
	for i := 1; i < 4; i++ {
		gap := at[i].Sub(at[i-1])
		require.GreaterOrEqual(t, gap, backoff(i), "attempt %d came %s after the one before, within its backoff", i+1, gap)
	}

	next := f.add(func(o *cluster.Options) { o.TTL = 10 * time.Minute })
	require.Same(t, next, f.leader(f.nodes))
	ok, _ := first.Leading()
	require.False(t, ok)
	submitAndSeeEnd(t, first, first, next)
}

func TestDefaultTakeoverBackoffDoublesUpToThreeTTLs(t *testing.T) {
	var got []time.Duration
	for failures := range 7 {
		got = append(got, cluster.DefaultTakeoverBackoff(2*time.Second, 10*time.Second, failures+1))
	}
	s := time.Second
	require.Equal(t, []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s}, got)
	require.Equal(t, 30*s, cluster.DefaultTakeoverBackoff(2*time.Second, 10*time.Second, 1<<30), "no overflow")
}

// The count of failed takeovers, which the backoff grows with, starts again
// after a leadership that lasted (a TTL): a node whose takeover failed once,
// then led for a while and lost the lease, backs off from the start when its
// next takeover fails.
func TestALeadershipThatLastedResetsTheTakeoverBackoff(t *testing.T) {
	var rec takeovers
	const ttl = 2 * time.Second
	f := newFleet(t, 1, 5*time.Millisecond, func(o *cluster.Options) {
		o.TTL = ttl
		o.TakeoverBackoff = func(failures int) time.Duration { return rec.backoff(failures, 100*time.Millisecond) }
		o.Lead = func(_ context.Context, _ *engine.Engine, start func() error) (*cluster.Leadership, error) {
			if rec.lead() == 2 {
				return &cluster.Leadership{}, start()
			}
			return nil, errors.New("read the plugin store: timeout")
		}
	})
	n := f.nodes[0]
	require.Same(t, n, f.leader(f.nodes), "the second takeover leads")
	_, since := n.Leading()
	waitfor.Eventually(t, "it has led for a TTL", func() bool { return time.Since(since) > ttl })
	n.cut.Partition()
	waitfor.Eventually(t, "the cut-off leader steps down", func() bool { ok, _ := n.Leading(); return !ok })
	n.cut.Heal()
	waitfor.Eventually(t, "it takes the lease again, and fails", func() bool {
		_, failures := rec.list()
		return len(failures) == 2
	})
	_, failures := rec.list()
	require.Equal(t, []int{1, 1}, failures, "the leadership between the failures reset their count")
}

// A node that steps down and whose standby engine then waits on the
// database (here a lock on the lanes it loads; a database that does not
// answer does the same) still answers for itself meanwhile: whether it
// leads, whether it is ready. Starting the standby engine holds no lock
// that those take.
func TestANodeWhoseStandbyWaitsOnTheDatabaseStillAnswers(t *testing.T) {
	proceed := make(chan struct{})
	var rec takeovers
	f := newFleet(t, 1, 5*time.Millisecond, func(o *cluster.Options) {
		o.TakeoverBackoff = func(failures int) time.Duration { return rec.backoff(failures, time.Hour) }
		o.Lead = func(ctx context.Context, _ *engine.Engine, _ func() error) (*cluster.Leadership, error) {
			rec.lead()
			select {
			case <-proceed:
			case <-ctx.Done():
			}
			return nil, errors.New("the plugin host did not start")
		}
	})
	n := f.nodes[0]
	first := n.Engine() // the standby engine it started with
	waitfor.Eventually(t, "the node takes the lease and starts its takeover", func() bool { return rec.count() == 1 })

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) }) // before the fleet stops: the lock goes
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	lanes := pgx.Identifier{f.schema, "lanes"}.Sanitize()
	_, err = tx.Exec(ctx, "LOCK TABLE "+lanes+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	close(proceed)

	probe, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer probe.Close(ctx) //nolint:errcheck
	waitfor.Eventually(t, "the standby engine waits for the lanes", func() bool {
		var waiting bool
		err := probe.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = $1::regclass AND NOT granted)`, lanes).Scan(&waiting)
		require.NoError(t, err)
		return waiting
	})
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		n.Leading()
		_ = n.Ready()
	}()
	waitfor.Eventually(t, "the node says whether it leads and is ready", func() bool {
		select {
		case <-answered:
			return true
		default:
			return false
		}
	})
	ok, _ := n.Leading()
	require.False(t, ok)

	require.NoError(t, tx.Rollback(ctx))
	waitfor.Eventually(t, "the node follows again, with a new standby engine", func() bool {
		e := n.Engine()
		return e != first && e.Standby()
	})
}

// A node that steps down before its log holds any event (here: it took the
// lease of an empty store and its takeover failed) follows again from the
// start of the log it kept, not from wherever the store is by the time its
// standby engine starts: what the new leader committed meanwhile reaches
// its event log too, which holds every event from the first, seq for seq
// the same as the leader's.
func TestANodeThatStepsDownWithAnEmptyLogKeepsEveryEventTheLeaderCommitsMeanwhile(t *testing.T) {
	var rec takeovers
	second := make(chan struct{}) // closed once node-2 runs
	resume := make(chan struct{}) // closed once node-2 has committed events
	var engines atomic.Int32      // node-1's engines: standby, leader, standby again
	f := newFleet(t, 1, 5*time.Millisecond, func(o *cluster.Options) {
		o.TTL = 10 * time.Minute
		o.TakeoverBackoff = func(failures int) time.Duration { return rec.backoff(failures, time.Hour) }
		newEngine := o.NewEngine
		o.NewEngine = func(events *engine.EventLog) (*engine.Engine, error) {
			if engines.Add(1) == 3 {
				<-resume // the standby engine after the failed takeover starts late
			}
			return newEngine(events)
		}
		o.Lead = func(ctx context.Context, _ *engine.Engine, _ func() error) (*cluster.Leadership, error) {
			rec.lead()
			select {
			case <-second:
			case <-ctx.Done():
			}
			return nil, errors.New("read the plugin store: timeout")
		}
	})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // a failure before the release does not hold node-1 up as the fleet stops
	first := f.nodes[0]
	waitfor.Eventually(t, "node-1 takes the lease and starts its takeover", func() bool { return rec.count() == 1 })
	require.Zero(t, first.Events().Last(), "node-1's log is empty")
	next := f.add(func(o *cluster.Options) { o.TTL = 10 * time.Minute })
	close(second)
	require.Same(t, next, f.leader(f.nodes))
	waitfor.Eventually(t, "node-1 starts its standby engine again", func() bool { return engines.Load() == 3 })

	// node-2 commits while node-1 has no engine yet.
	early := submitAndSeeEnd(t, next, next)
	release()
	later := submitAndSeeEnd(t, next, first)

	ends := terminalEvents(first.Node)
	require.Equal(t, 1, ends[early], "the task that ended before node-1 followed again")
	require.Equal(t, 1, ends[later])
	got, missed := first.Events().Read(0, 1<<20, nil)
	require.Zero(t, missed)
	want, _ := next.Events().Read(0, len(got), nil)
	require.Equal(t, len(got), len(want))
	require.EqualValues(t, 1, got[0].Seq)
	for i := range want {
		require.Equal(t, want[i].Seq, got[i].Seq)
		require.Equal(t, want[i].TaskID, got[i].TaskID)
		require.Equal(t, want[i].To, got[i].To)
	}
}
