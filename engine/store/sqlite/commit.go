package sqlite

// The write path: one transaction per engine batch (the engine groups many
// submissions into one batch, so this is group commit), with prepared
// statements. A task whose seq is above every stored task's is new and is
// inserted; any other is updated in place (only the columns that change over
// a task's life), and inserted only if it turns out to be missing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ncruces/go-sqlite3"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/internal/sqlcodec"
)

const (
	// taskInsertHead and taskUpsertTail frame the rows of an insert of
	// tasks (taskInsertSQL): a stored id is overwritten, its event seqs
	// appended to.
	taskInsertHead = `INSERT INTO tasks(seq, id, agent, lane, session, batch, parent, idem_key, state, ended_at,
	spec, params, status, result, event_seqs) VALUES `
	taskUpsertTail = ` ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, agent = excluded.agent, lane = excluded.lane,
	session = excluded.session, batch = excluded.batch, parent = excluded.parent, idem_key = excluded.idem_key,
	state = excluded.state, ended_at = excluded.ended_at, spec = excluded.spec, params = excluded.params,
	status = excluded.status, result = excluded.result,
	event_seqs = coalesce(tasks.event_seqs, x'') || coalesce(excluded.event_seqs, x'')`
	taskUpdateSQL = `UPDATE tasks SET state = ?1, ended_at = ?2, status = ?3, result = ?4,
	event_seqs = coalesce(event_seqs, x'') || coalesce(?5, x'') WHERE seq = ?6 AND id = ?7`
	taskEventsSQL = `UPDATE tasks SET event_seqs = coalesce(event_seqs, x'') || ?1 WHERE id = ?2`
	eventsSQL     = `INSERT INTO events(first_seq, last_seq, data) VALUES (?, ?, ?)`
	batchSQL      = `INSERT INTO batches(id, parallelism, webhook_url, created_at, ended_at, webhooks) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
	ON CONFLICT(id) DO UPDATE SET parallelism = ?2, webhook_url = ?3, created_at = ?4, ended_at = ?5, webhooks = ?6`
	laneSQL       = `INSERT INTO lanes(name, config) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET config = ?2`
	settingSQL    = `INSERT INTO settings(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2`
	settingDelSQL = `DELETE FROM settings WHERE key = ?`
	lastSeqSQL    = `UPDATE meta SET value = ? WHERE key = 'last_seq'`
)

// insertCols is the number of parameters an insert binds a task.
const insertCols = 15

// maxInsertRows is the most tasks one insert carries. One statement of many
// rows opens the table's and its indexes' cursors once and is stepped
// once, where a statement a task paid that for each
// (doc/adr/0005-durable-write-path.md, finding 33).
const maxInsertRows = 16

// taskInsertSQL is the insert of n tasks.
func taskInsertSQL(n int) string {
	const cols = insertCols
	var sb strings.Builder
	sb.WriteString(taskInsertHead)
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('(')
		for c := range cols {
			if c > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("?" + strconv.Itoa(i*cols+c+1))
		}
		sb.WriteByte(')')
	}
	sb.WriteString(taskUpsertTail)
	return sb.String()
}

// maxChunkEvents bounds the events of one chunk row, so that reading from
// an arbitrary seq decodes little more than it returns.
const maxChunkEvents = 256

// writer is the one connection that writes, with its statements and the
// counters that only commits change. It is used under Store.wmu.
type writer struct {
	c *sqlite3.Conn

	begin, commit, rollback                       *sqlite3.Stmt
	taskUpdate, taskEvents, eventsInsert          *sqlite3.Stmt
	batch, lane, setting, settingDel, lastSeqStmt *sqlite3.Stmt
	// taskInserts[n-1] inserts n tasks, prepared when first needed.
	taskInserts [maxInsertRows]*sqlite3.Stmt

	lastSeq    uint64 // the last committed event seq
	maxTaskSeq uint64 // the highest seq of a stored task
	// tasklessSwept is the last seq of the event chunks that the purge has
	// swept of events of no task for good (purge.go).
	tasklessSwept uint64

	// scratch, reused across commits
	bySeqs map[string][]byte
	// inserts are the batch's tasks to insert, with their event seqs.
	inserts []taskRow
	chunk   []byte
	status  []byte
	spec    []byte
}

func (w *writer) prepare() error {
	for _, p := range []struct {
		dst **sqlite3.Stmt
		sql string
	}{
		{&w.begin, "BEGIN IMMEDIATE"}, {&w.commit, "COMMIT"}, {&w.rollback, "ROLLBACK"},
		{&w.taskUpdate, taskUpdateSQL}, {&w.taskEvents, taskEventsSQL},
		{&w.eventsInsert, eventsSQL}, {&w.batch, batchSQL}, {&w.lane, laneSQL}, {&w.setting, settingSQL},
		{&w.settingDel, settingDelSQL}, {&w.lastSeqStmt, lastSeqSQL},
	} {
		st, _, err := w.c.Prepare(p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.dst = st
	}
	w.bySeqs = map[string][]byte{}
	return nil
}

func (w *writer) loadCounters() error {
	last, err := queryInt(w.c, "SELECT value FROM meta WHERE key = 'last_seq'")
	if err != nil {
		return fmt.Errorf("read last seq: %w", err)
	}
	maxTask, err := queryInt(w.c, "SELECT coalesce(max(seq), 0) FROM tasks")
	if err != nil {
		return fmt.Errorf("read tasks: %w", err)
	}
	w.lastSeq, w.maxTaskSeq = uint64(last), uint64(maxTask)
	return nil
}

func (w *writer) close() error {
	var errs []error
	stmts := []*sqlite3.Stmt{w.begin, w.commit, w.rollback, w.taskUpdate, w.taskEvents,
		w.eventsInsert, w.batch, w.lane, w.setting, w.settingDel, w.lastSeqStmt}
	for _, st := range append(stmts, w.taskInserts[:]...) {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, w.c.Close())...)
}

// Commit implements engine.Store. The batch's events must follow the last
// committed seq and increase; otherwise nothing is written.
func (s *Store) Commit(ctx context.Context, b *engine.Batch) error {
	if b.Empty() {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	w := s.w
	if w == nil {
		return errClosed
	}
	prev := w.lastSeq
	for i := range b.Events {
		if seq := b.Events[i].Seq; seq <= prev {
			return fmt.Errorf("sqlite store: commit: event seq %d does not follow %d", seq, prev)
		}
		prev = b.Events[i].Seq
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	maxTask, err := w.write(b)
	if err != nil {
		if rerr := w.rollback.Exec(); rerr != nil && !w.c.GetAutocommit() {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return s.describe(fmt.Errorf("commit: %w", err))
	}
	if n := len(b.Events); n > 0 {
		w.lastSeq = b.Events[n-1].Seq
	}
	w.maxTaskSeq = maxTask
	return nil
}

// write runs the batch's transaction and returns the new highest task seq.
func (w *writer) write(b *engine.Batch) (maxTask uint64, err error) {
	if err := w.begin.Exec(); err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	for i := range b.Batches {
		bi := &b.Batches[i]
		st := w.batch
		_ = st.BindText(1, bi.ID)
		_ = st.BindInt(2, bi.Parallelism)
		_ = st.BindText(3, bi.WebhookURL)
		_ = st.BindInt64(4, unixNano(bi.CreatedAt))
		_ = st.BindInt64(5, unixNano(bi.EndedAt))
		if len(bi.Webhooks) > 0 {
			raw, err := json.Marshal(bi.Webhooks)
			if err != nil {
				return 0, fmt.Errorf("batch %s webhooks: %w", bi.ID, err)
			}
			_ = st.BindText(6, string(raw))
		} else {
			_ = st.BindNull(6)
		}
		if err := st.Exec(); err != nil {
			return 0, fmt.Errorf("batch %s: %w", bi.ID, err)
		}
	}
	// The seqs of each task's events, to append to its row.
	bySeqs := w.bySeqs
	clear(bySeqs)
	for i := range b.Events {
		if id := b.Events[i].TaskID; id != "" {
			bySeqs[id] = appendSeqs(bySeqs[id], b.Events[i].Seq)
		}
	}
	maxTask = w.maxTaskSeq
	w.inserts = w.inserts[:0]
	for _, t := range b.Tasks {
		seqs := bySeqs[t.ID]
		delete(bySeqs, t.ID)
		if t.Seq > maxTask {
			// Above every task stored or written so far: new.
			w.inserts = append(w.inserts, taskRow{t, seqs})
			maxTask = t.Seq
			continue
		}
		stored, err := w.updateTask(t, seqs)
		if err != nil {
			return 0, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if !stored { // lost by the store, or new in this batch and written twice
			w.inserts = append(w.inserts, taskRow{t, seqs})
		}
	}
	err = w.insertTasks(w.inserts)
	clear(w.inserts) // the batch's tasks are the engine's again
	if err != nil {
		return 0, err
	}
	for id, seqs := range bySeqs { // events of tasks the batch does not carry
		st := w.taskEvents
		_ = st.BindBlob(1, seqs)
		_ = st.BindText(2, id)
		if err := st.Exec(); err != nil {
			return 0, fmt.Errorf("events of task %s: %w", id, err)
		}
	}
	for evs := b.Events; len(evs) > 0; {
		n := min(len(evs), maxChunkEvents)
		w.chunk = encodeEvents(w.chunk[:0], evs[:n])
		st := w.eventsInsert
		_ = st.BindInt64(1, int64(evs[0].Seq))
		_ = st.BindInt64(2, int64(evs[n-1].Seq))
		_ = st.BindBlob(3, w.chunk)
		if err := st.Exec(); err != nil {
			return 0, fmt.Errorf("events %d..%d: %w", evs[0].Seq, evs[n-1].Seq, err)
		}
		evs = evs[n:]
	}
	if n := len(b.Events); n > 0 {
		_ = w.lastSeqStmt.BindInt64(1, int64(b.Events[n-1].Seq))
		if err := w.lastSeqStmt.Exec(); err != nil {
			return 0, fmt.Errorf("last seq: %w", err)
		}
	}
	for i := range b.Lanes {
		cfg, err := encodeLane(&b.Lanes[i])
		if err != nil {
			return 0, fmt.Errorf("lane %s: %w", b.Lanes[i].Name, err)
		}
		_ = w.lane.BindText(1, b.Lanes[i].Name)
		_ = w.lane.BindBlob(2, cfg)
		if err := w.lane.Exec(); err != nil {
			return 0, fmt.Errorf("lane %s: %w", b.Lanes[i].Name, err)
		}
	}
	for _, set := range b.Settings {
		st := w.settingDel
		if set.Value != nil {
			st = w.setting
			_ = st.BindBlob(2, set.Value)
		}
		_ = st.BindText(1, set.Key)
		if err := st.Exec(); err != nil {
			return 0, fmt.Errorf("setting %s: %w", set.Key, err)
		}
	}
	if err := w.commit.Exec(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return maxTask, nil
}

// taskRow is a task to insert and the seqs of its events in the batch.
type taskRow struct {
	t    *engine.Task
	seqs []byte
}

// updateTask writes the changing columns of a task that may be stored,
// and reports whether it was.
func (w *writer) updateTask(t *engine.Task, seqs []byte) (stored bool, err error) {
	w.status = appendStatus(w.status[:0], t)
	st := w.taskUpdate
	_ = st.BindInt(1, int(t.State))
	bindEnded(st, 2, t)
	_ = st.BindBlob(3, w.status)
	bindBlob(st, 4, t.Result)
	bindBlob(st, 5, seqs)
	_ = st.BindInt64(6, int64(t.Seq))
	_ = st.BindText(7, t.ID)
	if err := st.Exec(); err != nil {
		return false, err
	}
	return w.c.Changes() == 1, nil
}

// rowsName names the tasks of rows in an error.
func rowsName(rows []taskRow) string {
	if len(rows) == 1 {
		return "task " + rows[0].t.ID
	}
	return strconv.Itoa(len(rows)) + " tasks, the first " + rows[0].t.ID
}

// insertTasks inserts rows, maxInsertRows to a statement.
func (w *writer) insertTasks(rows []taskRow) error {
	for len(rows) > 0 {
		n := min(len(rows), maxInsertRows)
		st := w.taskInserts[n-1]
		if st == nil {
			var err error
			if st, _, err = w.c.Prepare(taskInsertSQL(n)); err != nil {
				return fmt.Errorf("prepare the insert of %d tasks: %w", n, err)
			}
			w.taskInserts[n-1] = st
		}
		for i, r := range rows[:n] {
			if err := w.bindTask(st, i*insertCols, r); err != nil {
				return fmt.Errorf("task %s: %w", r.t.ID, err)
			}
		}
		if err := st.Exec(); err != nil {
			return fmt.Errorf("insert %s: %w", rowsName(rows[:n]), err)
		}
		rows = rows[n:]
	}
	return nil
}

// bindTask binds a task's columns to an insert, from parameter at+1.
func (w *writer) bindTask(st *sqlite3.Stmt, at int, r taskRow) error {
	t := r.t
	var err error
	if w.spec, err = sqlcodec.AppendSpec(w.spec[:0], t.Spec); err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	w.status = appendStatus(w.status[:0], t)
	_ = st.BindInt64(at+1, int64(t.Seq))
	_ = st.BindText(at+2, t.ID)
	_ = st.BindText(at+3, t.Spec.AgentID)
	_ = st.BindText(at+4, t.Spec.Lane)
	bindText(st, at+5, t.Spec.Session())
	bindText(st, at+6, t.Spec.BatchID)
	bindText(st, at+7, t.Spec.ParentID)
	bindText(st, at+8, t.Spec.IdempotencyKey)
	_ = st.BindInt(at+9, int(t.State))
	bindEnded(st, at+10, t)
	_ = st.BindBlob(at+11, w.spec) // bound blobs are copied
	var params []byte
	if t.Spec.Action != nil {
		params = t.Spec.Action.Params
	}
	bindBlob(st, at+12, params)
	_ = st.BindBlob(at+13, w.status)
	bindBlob(st, at+14, t.Result)
	bindBlob(st, at+15, r.seqs)
	return nil
}

// bindEnded binds the end of a terminal task (its EndedAt, else its last
// update), or NULL for a live one: the column says "terminal" and orders
// purges.
func bindEnded(st *sqlite3.Stmt, i int, t *engine.Task) {
	if !t.State.Terminal() {
		_ = st.BindNull(i)
		return
	}
	at := unixNano(t.EndedAt)
	if at == 0 {
		at = max(unixNano(t.UpdatedAt), 1)
	}
	_ = st.BindInt64(i, at)
}

func bindText(st *sqlite3.Stmt, i int, s string) {
	if s == "" {
		_ = st.BindNull(i)
	} else {
		_ = st.BindText(i, s)
	}
}

func bindBlob(st *sqlite3.Stmt, i int, b []byte) {
	if b == nil {
		_ = st.BindNull(i)
	} else {
		_ = st.BindBlob(i, b)
	}
}
