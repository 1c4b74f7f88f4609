package postgres_test

// A lone submitter: one Submit after another, the lane running, every
// attempt ending at once. ADR 0005 (finding 15) measured where its time goes
// with the benchmark below, strace and perf attached to the backend it
// names, and pg_prepared_statements.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/engine/store/storebench"
)

// roundTrips counts what a store sends: pipelines (pgx batches, one round
// trip each), those that insert a task, and statements sent on their own,
// and notes the backends that served them.
type roundTrips struct {
	mu                       sync.Mutex
	pipelines, withTask, one int
	backends                 map[uint32]bool
	// sent and answered: when the last pipeline that inserts a task was
	// sent and when its results were all read.
	sent, answered time.Time
}

func newRoundTrips() *roundTrips { return &roundTrips{backends: map[uint32]bool{}} }

func (r *roundTrips) TraceQueryStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.one++
	r.backends[c.PgConn().PID()] = true
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pipelines++
	r.backends[c.PgConn().PID()] = true
	for _, q := range d.Batch.QueuedQueries {
		if strings.HasPrefix(q.SQL, "INSERT INTO tasks ") {
			r.withTask++
			r.sent = time.Now()
			return context.WithValue(ctx, withTaskKey{}, true)
		}
	}
	return ctx
}

type withTaskKey struct{}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	if ctx.Value(withTaskKey{}) == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answered = time.Now()
}

// times returns when the last pipeline with a task was sent and answered.
func (r *roundTrips) times() (sent, answered time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent, r.answered
}

func (r *roundTrips) read() (pipelines, withTask, one int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pipelines, r.withTask, r.one
}

// backendCPU is the CPU time of the backends that served the store so far,
// read from /proc (0 when the server is not on this machine).
func (r *roundTrips) backendCPU() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum time.Duration
	for pid := range r.backends {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			continue
		}
		var ns int64
		if _, err := fmt.Sscan(string(raw), &ns); err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}

// loneEngine starts an engine over a fresh store whose connections trips
// watches, named application (pg_stat_activity.application_name).
func loneEngine(t testing.TB, trips *roundTrips, application string, paused bool) (*postgres.Store, *engine.Engine) {
	t.Helper()
	s := openStore(t, newSchema(t), func(o *postgres.Options) {
		o.ConfigurePool = func(c *pgxpool.Config) {
			c.ConnConfig.Tracer = trips
			c.ConnConfig.RuntimeParams["application_name"] = application
		}
	})
	e, err := engine.New(engine.Options{Store: s, Executor: engine.NoopExecutor{}, Config: engine.Config{
		Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 16, Paused: paused}},
	}})
	require.NoError(t, err)
	require.NoError(t, e.Start(bg))
	return s, e
}

// loneSpec is a task like those of `switchyard bench --mode submit`.
var loneSpec = engine.TaskSpec{AgentID: "a", Labels: map[string]string{"k": "v"},
	Action: &engine.Action{Kind: "click", Selector: "css:#go", Params: json.RawMessage(`{"n":1}`)}}

// plans is a prepared statement's count of plans, from pg_prepared_statements.
type plans struct {
	stmt            string
	generic, custom int64
}

// commitPlans returns the plan counts of the commit statements (inserts of
// tasks, statuses and events, status updates) on every idle connection of
// the store's pool; ok is false before PostgreSQL 14, which does not count
// plans.
func commitPlans(t testing.TB, s *postgres.Store) (found []plans, ok bool) {
	t.Helper()
	var version int
	require.NoError(t, s.Pool().QueryRow(bg, `SELECT current_setting('server_version_num')::int`).Scan(&version))
	if version < 140000 {
		return nil, false
	}
	for _, c := range s.Pool().AcquireAllIdle(bg) {
		rows, err := c.Query(bg, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err == nil {
			for rows.Next() {
				var p plans
				if err = rows.Scan(&p.stmt, &p.generic, &p.custom); err != nil {
					break
				}
				if strings.HasPrefix(p.stmt, "INSERT INTO t") || strings.HasPrefix(p.stmt, "INSERT INTO events") ||
					strings.HasPrefix(p.stmt, "UPDATE task_status") {
					found = append(found, p)
				}
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		c.Release() // before any assertion: the store's Close waits for its connections
		require.NoError(t, err)
	}
	return found, true
}

// A lone submission costs one round trip: its task and its first attempt
// in one pipeline, nothing sent on its own. And PostgreSQL plans none of the
// commit's statements afresh each time: every one of them has a cached
// plan after its first five executions — the update of the task before,
// which each such commit carries, too.
func TestALoneSubmissionIsOneRoundTripOfCachedPlans(t *testing.T) {
	t.Parallel()
	trips := newRoundTrips()
	s, e := loneEngine(t, trips, "switchyard", false)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = e.Shutdown(bg)
		}
	})
	for range 3 { // the engine's start-up reads are behind
		_, err := e.Submit(bg, loneSpec)
		require.NoError(t, err)
	}
	p0, t0, q0 := trips.read()
	const n = 40
	for range n {
		_, err := e.Submit(bg, loneSpec)
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
	if found, ok := commitPlans(t, s); ok {
		require.GreaterOrEqual(t, len(found), 4, "the commits' statements were found")
		for _, p := range found {
			require.LessOrEqual(t, p.custom, int64(5), "%d of %d executions were planned afresh: %s", p.custom, p.custom+p.generic, p.stmt)
		}
	} else {
		t.Log("PostgreSQL before 14 does not count plans: not checked")
	}

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

// BenchmarkLoneSubmit submits one task after another and reports, per
// submission: round trips, the commits beyond the submission's own (ends of
// attempts written on their own, when the next submission came more than
// lazyCommitDelay later), statements planned afresh (beyond the first five
// executions of each, warm-up included), this process's CPU, the CPU of the
// backends that served it (a local server only) and the median latency. Its
// connections are named switchyard-lone-bench, to attach strace or perf to
// their backends (and divide by the fdatasync calls, one per commit):
//
//	go test ./engine/store/postgres -run '^$' -bench LoneSubmit -benchtime 5000x &
//	sleep 3; strace -c $(psql postgres://postgres@127.0.0.1:5432/test -Atc \
//	  "SELECT '-p ' || pid FROM pg_stat_activity WHERE application_name = 'switchyard-lone-bench'")
//
// Under accept-only the lane is paused, as in `switchyard bench --mode submit
// --accept-only` and riverbench's insert: a commit holds the submission alone.
func BenchmarkLoneSubmit(b *testing.B) {
	b.Run("running", func(b *testing.B) { benchLoneSubmit(b, false) })
	b.Run("accept-only", func(b *testing.B) { benchLoneSubmit(b, true) })
}

func benchLoneSubmit(b *testing.B, paused bool) {
	trips := newRoundTrips()
	s, e := loneEngine(b, trips, "switchyard-lone-bench", paused)
	for range 20 {
		if _, err := e.Submit(bg, loneSpec); err != nil {
			b.Fatal(err)
		}
	}
	p0, _, q0 := trips.read()
	pg0, cpu0 := trips.backendCPU(), storebench.ProcessCPU()
	lat := make([]time.Duration, 0, b.N)
	var toSend, trip, toAnswer []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := e.Submit(bg, loneSpec); err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		lat = append(lat, end.Sub(start))
		if sent, answered := trips.times(); sent.After(start) && answered.After(sent) {
			toSend = append(toSend, sent.Sub(start))
			trip = append(trip, answered.Sub(sent))
			toAnswer = append(toAnswer, end.Sub(answered))
		}
	}
	b.StopTimer()
	p1, _, q1 := trips.read()
	pg1, cpu1 := trips.backendCPU(), storebench.ProcessCPU()
	require.NoError(b, e.Shutdown(bg))
	var replans int64 // beyond the five custom plans PostgreSQL makes of every statement first
	found, _ := commitPlans(b, s)
	for _, p := range found {
		replans += max(p.custom-5, 0)
	}
	n := float64(b.N)
	slices.Sort(lat)
	b.ReportMetric(float64(p1-p0+q1-q0)/n, "round-trips/op")
	b.ReportMetric(float64(p1-p0)/n-1, "extra-commits/op")
	b.ReportMetric(float64(replans)/n, "replans/op")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/n, "cpu-µs/op")
	b.ReportMetric(float64((pg1-pg0).Microseconds())/n, "backend-cpu-µs/op")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	// Where the median submission's time goes: from Submit to the
	// pipeline's send, the pipeline (the server's work, its sync and the
	// round trip), and from its results to Submit's return.
	for _, part := range []struct {
		name string
		ds   []time.Duration
	}{{"to-send-µs", toSend}, {"pipeline-µs", trip}, {"to-answer-µs", toAnswer}} {
		if len(part.ds) > 0 {
			slices.Sort(part.ds)
			b.ReportMetric(float64(part.ds[len(part.ds)/2].Microseconds()), part.name)
		}
	}
}
