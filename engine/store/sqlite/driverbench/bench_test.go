// Package driverbench compares pure-Go SQLite drivers on the SQLite store's
// real workload (doc/adr/0001-sqlite-driver.md records the figures and the
// choice). It is its own module so that the drivers that lost do not become
// dependencies of Switchyard. Run it with:
//
//	cd engine/store/sqlite/driverbench && go test -bench . -benchtime 3s
package driverbench

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver"
	_ "modernc.org/sqlite"
)

//go:embed schema.sql
var schema string

// The workload of one group commit in steady state, as the engine produces it
// with a no-op executor: n new tasks (QUEUED, one event each), the previous
// batch's tasks dispatched (ASSIGNED, one event, an attempt), and the batch
// before that finished (RUNNING and SUCCEEDED events, a result). That is n
// inserts, 2n updates and 4n events per commit: about 4 events and 3
// snapshots per task over its life.

const insertSQL = `INSERT INTO tasks(seq, id, agent, lane, session, batch, parent, idem_key, state, ended_at, spec, status, events)
 VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)
 ON CONFLICT(id) DO UPDATE SET state=excluded.state, ended_at=excluded.ended_at, status=excluded.status, events=events||excluded.events`

const updateSQL = `UPDATE tasks SET state=?, ended_at=?, status=?, events=events||? WHERE seq=? AND id=?`

const eventSQL = `INSERT INTO events(seq, task_id, data) VALUES(?,?,?)`

const listSQL = `SELECT seq, id, state, spec, status FROM tasks WHERE agent = ? AND seq < ? ORDER BY seq DESC LIMIT ?`

type taskRow struct {
	seq, ended     int64
	state          int
	id, agent      string
	batch          string
	spec           []byte
	attempt        string
	result         string
	createdAt, now int64
	evseqs         []byte
}

// status encodes the mutable part of a task the way the store does (JSON).
func (t *taskRow) status() []byte {
	b := make([]byte, 0, 320)
	b = append(b, `{"State":`...)
	b = strconv.AppendInt(b, int64(t.state), 10)
	b = append(b, `,"Reason":"dispatched","CreatedAt":`...)
	b = strconv.AppendInt(b, t.createdAt, 10)
	b = append(b, `,"UpdatedAt":`...)
	b = strconv.AppendInt(b, t.now, 10)
	b = append(b, `,"QueuedAt":`...)
	b = strconv.AppendInt(b, t.now, 10)
	b = append(b, `,"LastSeq":`...)
	b = strconv.AppendInt(b, t.seq, 10)
	if t.attempt != "" {
		b = append(b, `,"Attempts":`...)
		b = append(b, t.attempt...)
	}
	if t.result != "" {
		b = append(b, `,"Result":`...)
		b = append(b, t.result...)
	}
	return append(b, '}')
}

type eventRow struct {
	seq      int64
	typ      int
	taskID   string
	agent    string
	batch    string
	from, to int
	reason   string
}

// data encodes an event the way the store does (JSON).
func (e *eventRow) data() []byte {
	b := make([]byte, 0, 200)
	b = append(b, `{"At":`...)
	b = strconv.AppendInt(b, e.seq, 10)
	b = append(b, `,"Type":`...)
	b = strconv.AppendInt(b, int64(e.typ), 10)
	b = append(b, `,"AgentID":`...)
	b = strconv.AppendQuote(b, e.agent)
	b = append(b, `,"Lane":"main","BatchID":`...)
	b = strconv.AppendQuote(b, e.batch)
	b = append(b, `,"From":`...)
	b = strconv.AppendInt(b, int64(e.from), 10)
	b = append(b, `,"To":`...)
	b = strconv.AppendInt(b, int64(e.to), 10)
	b = append(b, `,"Attempt":1,"Reason":`...)
	b = strconv.AppendQuote(b, e.reason)
	return append(b, '}')
}

type update struct {
	t      *taskRow
	state  int
	ended  int64
	evseqs []byte
}

func seqBytes(seqs ...int64) []byte {
	var b []byte
	for _, s := range seqs {
		b = binary.AppendUvarint(b, uint64(s))
	}
	return b
}

// workload produces the rows of successive group commits.
type workload struct {
	n         int
	seq       int64
	tasks     [][]*taskRow // per batch
	agents    int
	coalesced bool // each task committed once, already ended (an engine that runs tasks faster than it commits)
}

func (w *workload) next() (ins []*taskRow, ups []update, evs []eventRow) {
	k := len(w.tasks)
	batch := fmt.Sprintf("01JBATCH%018d", k)
	now := time.Now().UnixNano()
	ins = make([]*taskRow, w.n)
	for i := range ins {
		w.seq++
		agent := "agent-" + strconv.Itoa(int(w.seq)%w.agents)
		t := &taskRow{seq: w.seq, state: 1, id: fmt.Sprintf("01J%023d", w.seq), agent: agent, batch: batch, createdAt: now, now: now,
			spec: []byte(`{"AgentID":"` + agent + `","Lane":"main","Priority":2,"Action":{"Kind":"click","Selector":"css:#go","Params":{"x":1}},"BatchID":"` + batch + `","SubmittedAt":"2026-03-02T09:00:00Z"}`)}
		ins[i] = t
		evs = append(evs, eventRow{seq: w.seq, typ: 1, taskID: t.id, agent: agent, batch: batch, to: 1, reason: "submitted"})
		t.evseqs = seqBytes(w.seq)
		if w.coalesced {
			w.seq += 3
			t.state, t.ended = 6, now
			t.attempt = `[{"N":1,"LeaseID":` + strconv.FormatInt(t.seq, 10) + `,"InstanceID":"inst-1","AssignedAt":"2026-03-02T09:00:01Z"}]`
			t.result = `{"success":true,"result":{"clicked":true}}`
			evs = append(evs, eventRow{seq: w.seq - 2, typ: 1, taskID: t.id, agent: t.agent, batch: t.batch, from: 1, to: 3, reason: "dispatched"},
				eventRow{seq: w.seq - 1, typ: 1, taskID: t.id, agent: t.agent, batch: t.batch, from: 3, to: 4, reason: "started"},
				eventRow{seq: w.seq, typ: 1, taskID: t.id, agent: t.agent, batch: t.batch, from: 4, to: 6, reason: "succeeded"})
			t.evseqs = seqBytes(t.seq, w.seq-2, w.seq-1, w.seq)
		}
	}
	if w.coalesced {
		w.tasks = append(w.tasks, nil)
		return ins, nil, evs
	}
	if k >= 1 {
		for _, t := range w.tasks[k-1] {
			w.seq++
			t.state = 3
			t.attempt = `[{"N":1,"LeaseID":` + strconv.FormatInt(t.seq, 10) + `,"InstanceID":"inst-1","AssignedAt":"2026-03-02T09:00:01Z"}]`
			ups = append(ups, update{t: t, state: 3, evseqs: seqBytes(w.seq)})
			evs = append(evs, eventRow{seq: w.seq, typ: 1, taskID: t.id, agent: t.agent, batch: t.batch, from: 1, to: 3, reason: "dispatched"})
		}
	}
	if k >= 2 {
		for _, t := range w.tasks[k-2] {
			w.seq += 2
			t.state, t.ended = 6, now
			t.result = `{"success":true,"result":{"clicked":true}}`
			ups = append(ups, update{t: t, state: 6, ended: now, evseqs: seqBytes(w.seq-1, w.seq)})
			evs = append(evs, eventRow{seq: w.seq - 1, typ: 1, taskID: t.id, agent: t.agent, batch: t.batch, from: 3, to: 4, reason: "started"},
				eventRow{seq: w.seq, typ: 1, taskID: t.id, agent: t.agent, batch: t.batch, from: 4, to: 6, reason: "succeeded"})
		}
		w.tasks[k-2] = nil
	}
	// Events must be in seq order.
	sortEvents(evs)
	w.tasks = append(w.tasks, ins)
	return ins, ups, evs
}

func sortEvents(evs []eventRow) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j-1].seq > evs[j].seq; j-- {
			evs[j-1], evs[j] = evs[j], evs[j-1]
		}
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// store is one driver's way of running the workload.
type store interface {
	commit(ins []*taskRow, ups []update, evs []eventRow) error
	list(agent string, before int64, limit int) (int, error)
	close() error
}

// sqlStore runs the workload through database/sql.
type sqlStore struct {
	db                *sql.DB
	ins, upd, ev, lst *sql.Stmt
}

func openSQL(driver, dsn string) (*sqlStore, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		return nil, err
	}
	s := &sqlStore{db: db}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{{&s.ins, insertSQL}, {&s.upd, updateSQL}, {&s.ev, eventSQL}, {&s.lst, listSQL}} {
		if *p.dst, err = db.Prepare(p.q); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *sqlStore) commit(ins []*taskRow, ups []update, evs []eventRow) error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	insS, updS, evS := tx.Stmt(s.ins), tx.Stmt(s.upd), tx.Stmt(s.ev)
	for _, t := range ins {
		if _, err := insS.Exec(t.seq, t.id, t.agent, "main", nil, nullable(t.batch), nil, nil, t.state, nullInt(t.ended), t.spec, t.status(), t.evseqs); err != nil {
			return err
		}
	}
	for _, u := range ups {
		if _, err := updS.Exec(u.state, nullInt(u.ended), u.t.status(), u.evseqs, u.t.seq, u.t.id); err != nil {
			return err
		}
	}
	for _, e := range evs {
		if _, err := evS.Exec(e.seq, e.taskID, e.data()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func (s *sqlStore) list(agent string, before int64, limit int) (int, error) {
	rows, err := s.lst.Query(agent, before, limit)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var (
		seq, state   int64
		id           string
		spec, status []byte
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &id, &state, &spec, &status); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

func (s *sqlStore) close() error { return s.db.Close() }

// nativeStore runs the workload through ncruces' own API, without
// database/sql.
type nativeStore struct {
	c                 *sqlite3.Conn
	ins, upd, ev, lst *sqlite3.Stmt
	begin, commitS    *sqlite3.Stmt
	ev16              *sqlite3.Stmt
}

func openNative(path, pragmas string) (*nativeStore, error) {
	c, err := sqlite3.Open(path)
	if err != nil {
		return nil, err
	}
	if err := c.Exec(pragmas); err != nil {
		return nil, err
	}
	if err := c.Exec(schema); err != nil {
		return nil, err
	}
	s := &nativeStore{c: c}
	for _, p := range []struct {
		dst **sqlite3.Stmt
		q   string
	}{{&s.ins, insertSQL}, {&s.upd, updateSQL}, {&s.ev, eventSQL}, {&s.lst, listSQL}, {&s.begin, "BEGIN IMMEDIATE"}, {&s.commitS, "COMMIT"}} {
		if *p.dst, _, err = c.Prepare(p.q); err != nil {
			return nil, err
		}
	}
	if os.Getenv("MULTI") != "" {
		if s.ev16, _, err = c.Prepare("INSERT INTO events(seq, task_id, data) VALUES" + strings.Repeat("(?,?,?),", 15) + "(?,?,?)"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func bindNullText(s *sqlite3.Stmt, i int, v string) {
	if v == "" {
		_ = s.BindNull(i)
	} else {
		_ = s.BindText(i, v)
	}
}

func bindNullBlob(s *sqlite3.Stmt, i int, v []byte) {
	if v == nil {
		_ = s.BindNull(i)
	} else {
		_ = s.BindBlob(i, v)
	}
}

func (s *nativeStore) commit(ins []*taskRow, ups []update, evs []eventRow) (err error) {
	if err := s.begin.Exec(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = s.c.Exec("ROLLBACK")
		}
	}()
	st := s.ins
	for _, t := range ins {
		_ = st.BindInt64(1, t.seq)
		_ = st.BindText(2, t.id)
		_ = st.BindText(3, t.agent)
		_ = st.BindText(4, "main")
		_ = st.BindNull(5)
		bindNullText(st, 6, t.batch)
		_ = st.BindNull(7)
		_ = st.BindNull(8)
		_ = st.BindInt64(9, int64(t.state))
		bindNullInt(st, 10, t.ended)
		_ = st.BindBlob(11, t.spec)
		_ = st.BindBlob(12, t.status())
		_ = st.BindBlob(13, t.evseqs)
		if err := st.Exec(); err != nil {
			return err
		}
	}
	st = s.upd
	for _, u := range ups {
		_ = st.BindInt64(1, int64(u.state))
		bindNullInt(st, 2, u.ended)
		_ = st.BindBlob(3, u.t.status())
		_ = st.BindBlob(4, u.evseqs)
		_ = st.BindInt64(5, u.t.seq)
		_ = st.BindText(6, u.t.id)
		if err := st.Exec(); err != nil {
			return err
		}
	}
	if s.ev16 != nil {
		for len(evs) >= 16 {
			st = s.ev16
			for i, e := range evs[:16] {
				_ = st.BindInt64(3*i+1, e.seq)
				_ = st.BindText(3*i+2, e.taskID)
				_ = st.BindBlob(3*i+3, e.data())
			}
			if err := st.Exec(); err != nil {
				return err
			}
			evs = evs[16:]
		}
	}
	st = s.ev
	for _, e := range evs {
		_ = st.BindInt64(1, e.seq)
		_ = st.BindText(2, e.taskID)
		_ = st.BindBlob(3, e.data())
		if err := st.Exec(); err != nil {
			return err
		}
	}
	return s.commitS.Exec()
}

func bindNullInt(s *sqlite3.Stmt, i int, v int64) {
	if v == 0 {
		_ = s.BindNull(i)
	} else {
		_ = s.BindInt64(i, v)
	}
}

func (s *nativeStore) list(agent string, before int64, limit int) (int, error) {
	st := s.lst
	defer st.Reset() //nolint:errcheck
	_ = st.BindText(1, agent)
	_ = st.BindInt64(2, before)
	_ = st.BindInt64(3, int64(limit))
	n := 0
	for st.Step() {
		_ = st.ColumnInt64(0)
		_ = st.ColumnText(1)
		_ = st.ColumnInt64(2)
		_ = st.ColumnBlob(3, nil)
		_ = st.ColumnBlob(4, nil)
		n++
	}
	return n, st.Err()
}

func (s *nativeStore) close() error { return s.c.Close() }

type opener struct {
	name string
	open func(path, sync string) (store, error)
}

var openers = []opener{
	{"modernc", func(path, sync string) (store, error) {
		return openSQL("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_pragma=busy_timeout(5000)&_pragma=cache_size(-65536)&_txlock=immediate")
	}},
	{"ncruces-sql", func(path, sync string) (store, error) {
		return openSQL("sqlite3", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_pragma=busy_timeout(5000)&_pragma=cache_size(-65536)&_txlock=immediate")
	}},
	{"ncruces-native", func(path, sync string) (store, error) {
		return openNative(path, "PRAGMA journal_mode=WAL; PRAGMA synchronous="+sync+"; PRAGMA busy_timeout=5000; PRAGMA cache_size=-65536;")
	}},
}

// BenchmarkCommit measures group commits of the steady-state workload.
func BenchmarkCommit(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		for _, n := range []int{100, 1000} {
			for _, co := range []bool{false, true} {
				for _, o := range openers {
					b.Run(fmt.Sprintf("sync=%s/batch=%d/coalesced=%v/%s", sync, n, co, o.name), func(b *testing.B) {
						s, err := o.open(filepath.Join(b.TempDir(), "bench.db"), sync)
						if err != nil {
							b.Fatal(err)
						}
						defer s.close() //nolint:errcheck
						w := &workload{n: n, agents: 100, coalesced: co}
						batches := make([][3]any, b.N)
						for i := range batches {
							ins, ups, evs := w.next()
							batches[i] = [3]any{ins, ups, evs}
						}
						events := 0
						b.ResetTimer()
						start, cpu0 := time.Now(), cpuTime()
						for i := range batches {
							evs := batches[i][2].([]eventRow)
							events += len(evs)
							if err := s.commit(batches[i][0].([]*taskRow), batches[i][1].([]update), evs); err != nil {
								b.Fatal(err)
							}
						}
						el := time.Since(start).Seconds()
						b.ReportMetric(float64(n*b.N)/el, "tasks/s")
						b.ReportMetric(float64(events)/el, "events/s")
						b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n*b.N), "cpu-µs/task")
					})
				}
			}
		}
	}
}

// cpuTime returns the CPU time the process has used: on a shared machine it
// is a steadier measure of cost than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkList measures a keyset page of 50 tasks of one agent, newest
// first, in a database of 100,000 tasks.
func BenchmarkList(b *testing.B) {
	for _, o := range openers {
		b.Run(o.name, func(b *testing.B) {
			s, err := o.open(filepath.Join(b.TempDir(), "bench.db"), "NORMAL")
			if err != nil {
				b.Fatal(err)
			}
			defer s.close() //nolint:errcheck
			w := &workload{n: 1000, agents: 100}
			for range 100 {
				ins, ups, evs := w.next()
				if err := s.commit(ins, ups, evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n, err := s.list("agent-"+strconv.Itoa(i%100), w.seq-int64(i%50_000), 50)
				if err != nil || n != 50 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
