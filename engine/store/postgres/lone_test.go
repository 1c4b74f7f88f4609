package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

// roundTrips counts what a store sends: pipelines (pgx batches, one round
// trip each), those that insert a task, and statements sent on their own.
type roundTrips struct {
	mu                       sync.Mutex
	pipelines, withTask, one int
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.one++
	r.mu.Unlock()
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pipelines++
	for _, q := range d.Batch.QueuedQueries {
		if strings.HasPrefix(q.SQL, "INSERT INTO tasks ") {
			r.withTask++
		}
	}
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *roundTrips) read() (pipelines, withTask, one int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pipelines, r.withTask, r.one
}

// A lone submitter (one Submit after another, the lane running, attempts
// ending at once) costs one round trip per submission: its task and its
// first attempt in one pipeline, nothing sent on its own. And PostgreSQL
// plans none of the commit's statements afresh each time: every one of
// them has a cached plan after its first five executions — the update of
// the task before, which each such commit carries, too.
func TestALoneSubmissionIsOneRoundTripOfCachedPlans(t *testing.T) {
	t.Parallel()
	trips := &roundTrips{}
	s := openStore(t, newSchema(t), func(o *postgres.Options) {
		o.ConfigurePool = func(c *pgxpool.Config) { c.ConnConfig.Tracer = trips }
	})
	e, err := engine.New(engine.Options{Store: s, Executor: engine.NoopExecutor{}, Config: engine.Config{
		Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 16}},
	}})
	require.NoError(t, err)
	require.NoError(t, e.Start(bg))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = e.Shutdown(bg)
		}
	})
	spec := engine.TaskSpec{AgentID: "a", Labels: map[string]string{"k": "v"},
		Action: &engine.Action{Kind: "click", Selector: "css:#go", Params: json.RawMessage(`{"n":1}`)}}
	for range 3 { // the engine's start-up reads are behind
		_, err := e.Submit(bg, spec)
		require.NoError(t, err)
	}
	p0, t0, q0 := trips.read()
	const n = 40
	for range n {
		_, err := e.Submit(bg, spec)
		require.NoError(t, err)
	}
	p1, t1, q1 := trips.read()
	require.Equal(t, n, t1-t0, "one pipeline per submission carries its task")
	require.Zero(t, q1-q0, "nothing is sent outside a pipeline")
	// A commit nobody waits for (an attempt's end, when the next
	// submission is more than lazyCommitDelay away) is one more pipeline at
	// most per submission.
	require.LessOrEqual(t, p1-p0, 2*n)

	stopped = true
	require.NoError(t, e.Shutdown(bg))
	type plans struct {
		stmt            string
		generic, custom int64
	}
	var found []plans
	conns := s.Pool().AcquireAllIdle(bg)
	require.NotEmpty(t, conns)
	for _, c := range conns {
		rows, err := c.Query(bg, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err == nil {
			for rows.Next() {
				var p plans
				if err = rows.Scan(&p.stmt, &p.generic, &p.custom); err != nil {
					break
				}
				found = append(found, p)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		c.Release()
		require.NoError(t, err)
	}
	commits := 0
	for _, p := range found {
		if strings.HasPrefix(p.stmt, "INSERT INTO t") || strings.HasPrefix(p.stmt, "INSERT INTO events") ||
			strings.HasPrefix(p.stmt, "UPDATE task_status") {
			commits++
			require.LessOrEqual(t, p.custom, int64(5), "%d of %d executions were planned afresh: %s", p.custom, p.custom+p.generic, p.stmt)
		}
	}
	require.GreaterOrEqual(t, commits, 4, "the commits' statements were found")

	// The updates kept each task's events listed with it: purging the
	// tasks removes every one of their events.
	purged, err := s.Purge(bg, time.Now().Add(time.Hour), 1000)
	require.NoError(t, err)
	require.Equal(t, n+3, purged)
	evs, err := s.Events(bg, 0, 10_000)
	require.NoError(t, err)
	for _, ev := range evs {
		require.Empty(t, ev.TaskID, "event %d of a purged task is left", ev.Seq)
	}
}
