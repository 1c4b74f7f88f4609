package sqlite

// The read path: every method runs on a reader connection, sees the last
// committed state (WAL snapshots) and never waits for a commit.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ncruces/go-sqlite3"

	"github.com/switchyard/switchyard/engine"
)

const taskCols = "seq, id, state, spec, params, status, result"

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

// scanTask reads a row of taskCols.
func scanTask(st *sqlite3.Stmt) (*engine.Task, error) {
	t := &engine.Task{Seq: uint64(st.ColumnInt64(0)), ID: st.ColumnText(1), State: engine.State(st.ColumnInt(2))}
	params := st.ColumnBlob(4, nil)
	spec, err := decodeSpec(st.ColumnRawText(3), params)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	t.Spec = spec
	if err := decodeStatus(st.ColumnRawText(5), t); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if r := st.ColumnBlob(6, nil); r != nil {
		t.Result = json.RawMessage(r)
	}
	return t, nil
}

// bind binds args (string, int64 or []byte) from parameter 1.
func bind(st *sqlite3.Stmt, args []any) {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			_ = st.BindText(i+1, v)
		case int64:
			_ = st.BindInt64(i+1, v)
		case []byte:
			_ = st.BindBlob(i+1, v)
		default:
			panic(fmt.Sprintf("sqlite store: cannot bind %T", a))
		}
	}
}

// queryTasks runs a query of taskCols and appends its rows to dst.
func queryTasks(r *reader, q string, args []any, dst []*engine.Task) ([]*engine.Task, error) {
	st, err := r.stmt(q)
	if err != nil {
		return dst, err
	}
	defer st.Reset() //nolint:errcheck // the error is Step's, returned below
	bind(st, args)
	for st.Step() {
		t, err := scanTask(st)
		if err != nil {
			return dst, err
		}
		dst = append(dst, t)
	}
	return dst, st.Err()
}

// Task implements engine.Store.
func (s *Store) Task(ctx context.Context, id string) (*engine.Task, error) {
	var out []*engine.Task
	err := s.read(ctx, func(r *reader) (err error) {
		out, err = queryTasks(r, "SELECT "+taskCols+" FROM tasks WHERE id = ?", []any{id}, nil)
		return err
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("task %s: %w", id, err))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("task %s: %w", id, engine.ErrNotFound)
	}
	return out[0], nil
}

// FindIdempotent implements engine.Store.
func (s *Store) FindIdempotent(ctx context.Context, agentID, key string) (*engine.Task, error) {
	var out []*engine.Task
	err := s.read(ctx, func(r *reader) (err error) {
		out, err = queryTasks(r, "SELECT "+taskCols+" FROM tasks WHERE agent = ? AND idem_key = ?", []any{agentID, key}, nil)
		return err
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("idempotency key %q of agent %s: %w", key, agentID, err))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("idempotency key %q of agent %s: %w", key, agentID, engine.ErrNotFound)
	}
	return out[0], nil
}

// where appends the SQL conditions of f (each preceded by " AND ") and
// their arguments. Every equality is on an indexed column; states are
// inlined (they are numbers) so that the planner sees them.
func where(sb *strings.Builder, f *engine.TaskFilter, args []any) []any {
	for _, c := range []struct{ col, v string }{
		{"agent", f.AgentID}, {"lane", f.Lane}, {"session", f.SessionKey}, {"batch", f.BatchID}, {"parent", f.ParentID},
	} {
		if c.v != "" {
			sb.WriteString(" AND " + c.col + " = ?")
			args = append(args, c.v)
		}
	}
	if len(f.States) > 0 {
		sb.WriteString(" AND state IN (")
		for i, s := range f.States {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.Itoa(int(s)))
		}
		sb.WriteByte(')')
	}
	if len(f.IDs) > 0 {
		ids, _ := json.Marshal(f.IDs)
		sb.WriteString(" AND id IN (SELECT value FROM json_each(?))")
		args = append(args, string(ids))
	}
	if len(f.Labels) > 0 {
		labels, _ := json.Marshal(f.Labels)
		sb.WriteString(` AND (SELECT count(*) FROM json_each(?) AS want JOIN json_each(tasks.spec, '$.labels') AS got
			ON got.key = want.key AND got.type = 'text' AND got.value = want.value) = ?`)
		args = append(args, string(labels), int64(len(f.Labels)))
	}
	return args
}

// listSQL builds the query of a page and its arguments.
func listSQL(q engine.TaskQuery) (string, []any) {
	f := q.Filter
	states := slices.Clone(f.States)
	slices.Sort(states)
	states = slices.Compact(states)
	f.States = nil
	arm := func(sb *strings.Builder, state engine.State, args []any) []any {
		sb.WriteString("SELECT " + taskCols + " FROM tasks WHERE 1")
		if state != 0 {
			sb.WriteString(" AND state = " + strconv.Itoa(int(state)))
		}
		args = where(sb, &f, args)
		switch {
		case q.After == 0:
		case q.Order == engine.OldestFirst:
			sb.WriteString(" AND seq > ?")
			args = append(args, int64(q.After))
		default:
			sb.WriteString(" AND seq < ?")
			args = append(args, int64(q.After))
		}
		return args
	}
	var sb strings.Builder
	var args []any
	if len(states) == 0 {
		args = arm(&sb, 0, args)
	}
	for i, st := range states {
		if i > 0 {
			sb.WriteString(" UNION ALL ")
		}
		args = arm(&sb, st, args)
	}
	if q.Order == engine.OldestFirst {
		sb.WriteString(" ORDER BY seq ASC LIMIT ?")
	} else {
		sb.WriteString(" ORDER BY seq DESC LIMIT ?")
	}
	args = append(args, int64(q.Limit))
	return sb.String(), args
}

// Tasks implements engine.Store: a keyset page over seq. A filter on several
// states becomes one arm per state, merged in seq order (UNION ALL with
// ORDER BY and LIMIT merges the arms' ordered index scans), so that a page
// never sorts every task in those states.
func (s *Store) Tasks(ctx context.Context, q engine.TaskQuery) ([]*engine.Task, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	sql, args := listSQL(q)
	var out []*engine.Task
	err := s.read(ctx, func(r *reader) (err error) {
		out, err = queryTasks(r, sql, args, make([]*engine.Task, 0, min(q.Limit, 256)))
		return err
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("list tasks: %w", err))
	}
	return out, nil
}

// CountTasks implements engine.Store.
func (s *Store) CountTasks(ctx context.Context, f engine.TaskFilter) (map[engine.State]int, error) {
	var sb strings.Builder
	sb.WriteString("SELECT state, count(*) FROM tasks WHERE 1")
	args := where(&sb, &f, nil)
	sb.WriteString(" GROUP BY state")
	out := map[engine.State]int{}
	err := s.read(ctx, func(r *reader) error {
		st, err := r.stmt(sb.String())
		if err != nil {
			return err
		}
		defer st.Reset() //nolint:errcheck
		bind(st, args)
		for st.Step() {
			out[engine.State(st.ColumnInt(0))] = st.ColumnInt(1)
		}
		return st.Err()
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("count tasks: %w", err))
	}
	return out, nil
}

func queryBatches(r *reader, q string, args []any) ([]engine.BatchInfo, error) {
	st, err := r.stmt(q)
	if err != nil {
		return nil, err
	}
	defer st.Reset() //nolint:errcheck
	bind(st, args)
	var out []engine.BatchInfo
	for st.Step() {
		b := engine.BatchInfo{ID: st.ColumnText(0), Parallelism: st.ColumnInt(1),
			WebhookURL: st.ColumnText(2), CreatedAt: fromUnixNano(st.ColumnInt64(3)), EndedAt: fromUnixNano(st.ColumnInt64(4))}
		if raw := st.ColumnRawText(5); len(raw) > 0 {
			if err := json.Unmarshal(raw, &b.Webhooks); err != nil {
				return nil, fmt.Errorf("batch %s webhooks: %w", b.ID, err)
			}
		}
		out = append(out, b)
	}
	return out, st.Err()
}

// Batch implements engine.Store.
func (s *Store) Batch(ctx context.Context, id string) (*engine.BatchInfo, error) {
	var out []engine.BatchInfo
	err := s.read(ctx, func(r *reader) (err error) {
		out, err = queryBatches(r, "SELECT id, parallelism, webhook_url, created_at, ended_at, webhooks FROM batches WHERE id = ?", []any{id})
		return err
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("batch %s: %w", id, err))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("batch %s: %w", id, engine.ErrNotFound)
	}
	return &out[0], nil
}

// Events implements engine.Store.
func (s *Store) Events(ctx context.Context, after uint64, limit int) ([]engine.Event, error) {
	if limit <= 0 || after >= math.MaxInt64 { // seqs are int64 in SQLite: none is that large
		return nil, nil
	}
	var out []engine.Event
	err := s.read(ctx, func(r *reader) error {
		st, err := r.stmt(`SELECT data FROM events WHERE first_seq >=
			coalesce((SELECT max(first_seq) FROM events WHERE first_seq <= ?1), 0) ORDER BY first_seq`)
		if err != nil {
			return err
		}
		defer st.Reset() //nolint:errcheck
		_ = st.BindInt64(1, int64(after+1))
		n := 0
		keep := func(seq uint64) bool {
			if seq > after && n < limit {
				n++
				return true
			}
			return false
		}
		for n < limit && st.Step() {
			if out, err = decodeEvents(out, st.ColumnRawBlob(0), keep); err != nil {
				return err
			}
		}
		return st.Err()
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("events after %d: %w", after, err))
	}
	return out, nil
}

// Load implements engine.Store. It reads in one transaction, so that the
// tasks, batches, lanes, settings and last seq are one consistent state.
func (s *Store) Load(ctx context.Context) (*engine.Snapshot, error) {
	snap := &engine.Snapshot{Settings: map[string][]byte{}}
	err := s.read(ctx, func(r *reader) (err error) {
		if err := r.c.Exec("BEGIN"); err != nil {
			return err
		}
		defer func() {
			if cerr := r.c.Exec("COMMIT"); err == nil {
				err = cerr
			}
		}()
		if snap.Tasks, err = queryTasks(r, "SELECT "+taskCols+" FROM tasks WHERE state IN ("+liveStates+") ORDER BY seq", nil, nil); err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		if snap.Batches, err = queryBatches(r, `SELECT id, parallelism, webhook_url, created_at, ended_at, webhooks FROM batches
			WHERE id IN (SELECT batch FROM tasks WHERE state IN (`+liveStates+`) AND batch IS NOT NULL)
			ORDER BY created_at, id`, nil); err != nil {
			return fmt.Errorf("batches: %w", err)
		}
		st, err := r.stmt("SELECT name, config FROM lanes ORDER BY name")
		if err != nil {
			return err
		}
		for st.Step() {
			l, err := decodeLane(st.ColumnRawText(1))
			if err != nil {
				_ = st.Reset()
				return err
			}
			snap.Lanes = append(snap.Lanes, l)
		}
		if err := st.Reset(); err != nil {
			return fmt.Errorf("lanes: %w", err)
		}
		if st, err = r.stmt("SELECT key, value FROM settings"); err != nil {
			return err
		}
		for st.Step() {
			snap.Settings[st.ColumnText(0)] = st.ColumnBlob(1, []byte{})
		}
		if err := st.Reset(); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		if st, err = r.stmt("SELECT value FROM meta WHERE key = 'last_seq'"); err != nil {
			return err
		}
		if !st.Step() {
			err = errors.Join(errors.New("the last seq is missing"), st.Err())
		}
		snap.LastSeq = uint64(st.ColumnInt64(0))
		return errors.Join(err, st.Reset())
	})
	if err != nil {
		return nil, s.describe(fmt.Errorf("load: %w", err))
	}
	return snap, nil
}
