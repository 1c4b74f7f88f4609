package postgres

// The read path: every method runs on a pooled connection and sees the last
// committed state; Load reads in one REPEATABLE READ transaction, so that
// what it returns is one state.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/engine"
)

const (
	taskCols = "t.seq, t.id, s.state, t.spec, t.params, s.status, s.result"
	taskFrom = " FROM tasks t JOIN task_status s ON s.seq = t.seq"
)

// liveStates is the SQL list of the states that are not terminal.
var liveStates = func() string {
	var ss []string
	for s := engine.State(1); s.String() != "UNKNOWN"; s++ {
		if !s.Terminal() {
			ss = append(ss, strconv.Itoa(int(s)))
		}
	}
	return strings.Join(ss, ", ")
}()

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryTasks runs a query of taskCols and appends its rows to dst.
func queryTasks(ctx context.Context, q queryer, sql string, args []any, dst []*engine.Task) ([]*engine.Task, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return dst, err
	}
	defer rows.Close()
	var (
		seq                              int64
		state                            int16
		id, spec, params, status, result []byte
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &id, &state, &spec, &params, &status, &result); err != nil {
			return dst, err
		}
		t := &engine.Task{Seq: uint64(seq), ID: string(id), State: engine.State(state)}
		if t.Spec, err = decodeSpec(spec, params); err != nil {
			return dst, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if err := decodeStatus(status, t); err != nil {
			return dst, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if result != nil {
			t.Result = json.RawMessage(result)
		}
		dst = append(dst, t)
	}
	return dst, rows.Err()
}

// Task implements engine.Store.
func (s *Store) Task(ctx context.Context, id string) (*engine.Task, error) {
	out, err := queryTasks(ctx, s.pool, "SELECT "+taskCols+taskFrom+" WHERE t.id = $1", []any{[]byte(id)}, nil)
	if err != nil {
		return nil, s.describe("task "+id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("task %s: %w", id, engine.ErrNotFound)
	}
	return out[0], nil
}

// FindIdempotent implements engine.Store.
func (s *Store) FindIdempotent(ctx context.Context, agentID, key string) (*engine.Task, error) {
	var out []*engine.Task
	var err error
	if key != "" {
		out, err = queryTasks(ctx, s.pool, "SELECT "+taskCols+taskFrom+" WHERE t.agent = $1 AND t.idem_key = $2 ORDER BY t.seq LIMIT 1",
			[]any{[]byte(agentID), []byte(key)}, nil)
	}
	if err != nil {
		return nil, s.describe(fmt.Sprintf("idempotency key %q of agent %s", key, agentID), err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("idempotency key %q of agent %s: %w", key, agentID, engine.ErrNotFound)
	}
	return out[0], nil
}

// args collects positional parameters.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// where appends the conditions of f on the tasks table (each preceded by
// " AND "), not those on states. Every condition has an index: the
// equalities a B-tree ending with seq, the labels a GIN index.
func where(sb *strings.Builder, f *engine.TaskFilter, a *args) {
	for _, c := range []struct{ col, v string }{
		{"t.agent", f.AgentID}, {"t.lane", f.Lane}, {"t.session", f.SessionKey}, {"t.batch", f.BatchID}, {"t.parent", f.ParentID},
	} {
		if c.v != "" {
			sb.WriteString(" AND " + c.col + " = " + a.add([]byte(c.v)))
		}
	}
	if len(f.IDs) > 0 {
		ids := make([][]byte, len(f.IDs))
		for i, id := range f.IDs {
			ids[i] = []byte(id)
		}
		sb.WriteString(" AND t.id = ANY(" + a.add(ids) + "::bytea[])")
	}
	if len(f.Labels) > 0 {
		sb.WriteString(" AND t.labels @> " + a.add(labelElems(f.Labels)) + "::bytea[]")
	}
}

// hasTaskConditions reports whether f filters on more than states.
func hasTaskConditions(f *engine.TaskFilter) bool {
	return f.AgentID != "" || f.Lane != "" || f.SessionKey != "" || f.BatchID != "" || f.ParentID != "" ||
		len(f.IDs) > 0 || len(f.Labels) > 0
}

func sortedStates(ss []engine.State) []engine.State {
	ss = slices.Clone(ss)
	slices.Sort(ss)
	return slices.Compact(ss)
}

// listSQL builds the query of a page and its arguments. A filter on several
// states becomes one arm per state, each an ordered index scan cut at the
// page's size, merged in seq order: a page never sorts every task in those
// states. An arm that filters on its state alone reads the page's statuses
// first, through the (state, seq) index, and joins the tasks to those only:
// left to itself the planner may merge-join the whole tasks key instead,
// which walks every older task when the state's tasks are the newest.
func listSQL(q engine.TaskQuery) (string, []any) {
	var a args
	var cond strings.Builder
	where(&cond, &q.Filter, &a)
	onlyStates := cond.Len() == 0
	dir, cmp := "ASC", ">"
	if q.Order != engine.OldestFirst {
		dir, cmp = "DESC", "<"
	}
	after := ""
	if q.After != 0 {
		after = a.add(int64(min(q.After, math.MaxInt64)))
	}
	keyset := func(col string) string {
		if after == "" {
			return ""
		}
		return " AND " + col + " " + cmp + " " + after
	}
	limit := a.add(int64(q.Limit))
	arm := func(state engine.State) string {
		st := ""
		if state != 0 {
			st = " AND s.state = " + strconv.Itoa(int(state))
		}
		if state != 0 && onlyStates {
			return "SELECT " + taskCols + " FROM (SELECT * FROM task_status WHERE state = " + strconv.Itoa(int(state)) + keyset("seq") +
				" ORDER BY seq " + dir + " LIMIT " + limit + ") s JOIN tasks t ON t.seq = s.seq ORDER BY s.seq " + dir
		}
		return "SELECT " + taskCols + taskFrom + " WHERE true" + st + cond.String() + keyset("t.seq") +
			" ORDER BY t.seq " + dir + " LIMIT " + limit
	}
	states := sortedStates(q.Filter.States)
	switch len(states) {
	case 0:
		return arm(0), a
	case 1:
		return arm(states[0]), a
	}
	var sb strings.Builder
	sb.WriteString("SELECT * FROM (")
	for i, st := range states {
		if i > 0 {
			sb.WriteString(" UNION ALL ")
		}
		sb.WriteString("(" + arm(st) + ")")
	}
	sb.WriteString(") x ORDER BY seq " + dir + " LIMIT " + limit)
	return sb.String(), a
}

// Tasks implements engine.Store: a keyset page over seq.
func (s *Store) Tasks(ctx context.Context, q engine.TaskQuery) ([]*engine.Task, error) {
	if q.Limit <= 0 || q.After > math.MaxInt64 && q.Order == engine.OldestFirst {
		return nil, nil
	}
	sql, a := listSQL(q)
	out, err := queryTasks(ctx, s.pool, sql, a, make([]*engine.Task, 0, min(q.Limit, 256)))
	if err != nil {
		return nil, s.describe("list tasks", err)
	}
	return out, nil
}

// CountTasks implements engine.Store. A filter on states alone counts the
// status table's state index without touching the tasks.
func (s *Store) CountTasks(ctx context.Context, f engine.TaskFilter) (map[engine.State]int, error) {
	var a args
	var sb strings.Builder
	if hasTaskConditions(&f) {
		sb.WriteString("SELECT s.state, count(*)" + taskFrom + " WHERE true")
		where(&sb, &f, &a)
	} else {
		sb.WriteString("SELECT s.state, count(*) FROM task_status s WHERE true")
	}
	if len(f.States) > 0 {
		ss := make([]int16, len(f.States))
		for i, st := range f.States {
			ss[i] = int16(st)
		}
		sb.WriteString(" AND s.state = ANY(" + a.add(ss) + "::smallint[])")
	}
	sb.WriteString(" GROUP BY s.state")
	rows, err := s.pool.Query(ctx, sb.String(), a...)
	if err != nil {
		return nil, s.describe("count tasks", err)
	}
	out := map[engine.State]int{}
	var state int16
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[engine.State(state)] = int(n)
		return nil
	})
	if err != nil {
		return nil, s.describe("count tasks", err)
	}
	return out, nil
}

const batchCols = "id, parallelism, webhook_url, created_at, ended_at, webhooks"

func queryBatches(ctx context.Context, q queryer, sql string, args ...any) ([]engine.BatchInfo, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []engine.BatchInfo
	var (
		id, hook, webhooks []byte
		par                int32
		created, ended     int64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &par, &hook, &created, &ended, &webhooks}, func() error {
		b := engine.BatchInfo{ID: string(id), Parallelism: int(par), WebhookURL: string(hook),
			CreatedAt: fromUnixNano(created), EndedAt: fromUnixNano(ended)}
		if len(webhooks) > 0 {
			if err := json.Unmarshal(webhooks, &b.Webhooks); err != nil {
				return fmt.Errorf("batch %s webhooks: %w", b.ID, err)
			}
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

// Batch implements engine.Store.
func (s *Store) Batch(ctx context.Context, id string) (*engine.BatchInfo, error) {
	out, err := queryBatches(ctx, s.pool, "SELECT "+batchCols+" FROM batches WHERE id = $1", []byte(id))
	if err != nil {
		return nil, s.describe("batch "+id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("batch %s: %w", id, engine.ErrNotFound)
	}
	return &out[0], nil
}

// eventsSelectSQL reads the events after a seq: the rows of events and the
// first events held in tasks' rows (migration 0005), merged in seq order
// (two ordered scans of primary keys, each cut at the limit). The tasks
// scan stops at the limit-th row of events when there is one: no later seq
// can be on the page. Without that bound it would read every task after the
// seq whose first_at is NULL (tasks of before the migration, of small
// commits, of a closed gate) until it found limit rows; each of those has
// its first event in events, so with it the scan reads at most limit of
// them.
var eventsSelectSQL = `SELECT * FROM (
	(SELECT seq, at, type, task, agent, lane, session, batch, from_state, to_state, attempt, reason, webhook
		FROM events WHERE seq > $1 ORDER BY seq LIMIT $2)
	UNION ALL
	(SELECT seq, first_at, ` + firstEventType + `::smallint, id, agent, lane, session, batch, 0::smallint, first_to, 0, first_reason, first_webhook
		FROM tasks WHERE seq > $1 AND first_at IS NOT NULL
			AND seq <= coalesce((SELECT seq FROM events WHERE seq > $1 ORDER BY seq OFFSET $2 - 1 LIMIT 1), 9223372036854775807)
		ORDER BY seq LIMIT $2)
	) e ORDER BY seq LIMIT $2`

// firstEventType is the type of a first event in a task's row (firstInRow).
var firstEventType = strconv.Itoa(int(engine.EventState))

// Events implements engine.Store.
func (s *Store) Events(ctx context.Context, after uint64, limit int) ([]engine.Event, error) {
	out, err := s.events(ctx, after, limit, nil)
	if err != nil {
		return nil, s.describe(fmt.Sprintf("events after %d", after), err)
	}
	return out, nil
}

func (s *Store) events(ctx context.Context, after uint64, limit int, dst []engine.Event) ([]engine.Event, error) {
	if limit <= 0 || after >= math.MaxInt64 { // seqs are bigint: none is that large
		return dst, nil
	}
	rows, err := s.pool.Query(ctx, eventsSelectSQL, int64(after), int64(limit))
	if err != nil {
		return dst, err
	}
	var (
		seq, at                                   int64
		typ, from, to                             int16
		attempt                                   int32
		task, agent, lane, session, batch, reason []byte
		webhook                                   bool
	)
	_, err = pgx.ForEachRow(rows, []any{&seq, &at, &typ, &task, &agent, &lane, &session, &batch, &from, &to, &attempt, &reason, &webhook},
		func() error {
			dst = append(dst, engine.Event{Seq: uint64(seq), At: fromUnixNano(at), Type: engine.EventType(typ),
				TaskID: string(task), AgentID: string(agent), Lane: string(lane), SessionKey: string(session), BatchID: string(batch),
				From: engine.State(from), To: engine.State(to), Attempt: int(attempt), Reason: string(reason), Webhook: webhook})
			return nil
		})
	return dst, err
}

// Load implements engine.Store.
func (s *Store) Load(ctx context.Context) (*engine.Snapshot, error) {
	snap := &engine.Snapshot{Settings: map[string][]byte{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if snap.Tasks, err = queryTasks(ctx, tx, "SELECT "+taskCols+taskFrom+" WHERE s.state IN ("+liveStates+") ORDER BY t.seq", nil, nil); err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		if snap.Batches, err = queryBatches(ctx, tx, "SELECT "+batchCols+` FROM batches WHERE id IN
			(SELECT t.batch`+taskFrom+` WHERE s.state IN (`+liveStates+`) AND t.batch IS NOT NULL)
			ORDER BY created_at, id`); err != nil {
			return fmt.Errorf("batches: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT name, config FROM lanes ORDER BY name")
		if err != nil {
			return fmt.Errorf("lanes: %w", err)
		}
		var name string
		var raw []byte
		if _, err := pgx.ForEachRow(rows, []any{&name, &raw}, func() error {
			l, err := decodeLane(raw)
			if err != nil {
				return fmt.Errorf("lane %s: %w", name, err)
			}
			snap.Lanes = append(snap.Lanes, l)
			return nil
		}); err != nil {
			return fmt.Errorf("lanes: %w", err)
		}
		if rows, err = tx.Query(ctx, "SELECT key, value FROM settings"); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		if _, err := pgx.ForEachRow(rows, []any{&name, &raw}, func() error {
			snap.Settings[name] = append([]byte{}, raw...)
			return nil
		}); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		var last int64
		if err := tx.QueryRow(ctx, "SELECT value FROM meta WHERE key = 'last_seq'").Scan(&last); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				err = errors.New("the last seq is missing")
			}
			return fmt.Errorf("last seq: %w", err)
		}
		snap.LastSeq = uint64(last)
		return nil
	})
	if err != nil {
		return nil, s.describe("load", err)
	}
	return snap, nil
}
