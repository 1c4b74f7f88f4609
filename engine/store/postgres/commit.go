package postgres

// The write path. One engine batch is one pgx.Batch: its statements travel
// in one round trip and run in one implicit transaction (all or nothing).
// Rows go in as arrays (INSERT … SELECT unnest(…), …), one statement per
// table however many rows the batch holds (a lone status update goes by its
// key: statusUpdateOneSQL). The transaction starts with the fence (when this
// node leads under a lease) and the seq check, so that a refused batch
// writes nothing, and ends by notifying followers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/internal/sqlcodec"
)

// ErrNotLeader is what Commit (and the leader's command calls) return,
// wrapped, when the store is fenced to a lease epoch this node no longer
// holds. It wraps engine.ErrFenced: the engine stops writing.
var ErrNotLeader = fmt.Errorf("postgres store: this node does not hold the leader lease: %w", engine.ErrFenced)

// Error codes raised by the schema's functions (migrations/0001_init.sql, 0004_plain_checks.sql).
const (
	codeFenced = "SY001"
	codeSeq    = "SY002"
	codeUnique = "23505"
)

// fence is the lease epoch this node writes under.
type fence struct {
	lease, node string
	epoch       uint64
	deposed     bool // the elector stepped down: refuse without asking the database
}

// SetFence makes every later Commit (and CompleteCommand) check, in its own
// transaction, that node holds epoch of the leader lease and that the lease
// has not expired; otherwise it fails with ErrNotLeader and writes
// nothing. A paused-then-resumed old leader therefore cannot write after its
// lease was taken. An Elector made by this store sets the fence itself.
// Setting a new epoch forgets the commands taken under the previous one
// (they will be taken again).
func (s *Store) SetFence(node string, epoch uint64) {
	s.setFence(&fence{lease: DefaultLease, node: node, epoch: epoch})
}

func (s *Store) setFence(f *fence) { s.fence.Store(f) }

// syncEpochLocked catches up with a new fence epoch (under wmu): the
// commands taken under the previous epoch are forgotten (they will be taken
// again), and the highest task seq is read again, since another leader may
// have committed tasks since this store last did.
func (s *Store) syncEpochLocked(ctx context.Context) error {
	f := s.fence.Load()
	if f == nil || f.epoch == s.fenceEpoch {
		return nil
	}
	if err := s.loadMaxTaskSeq(ctx); err != nil {
		return err
	}
	s.fenceEpoch = f.epoch
	s.forgetTakenLocked()
	return nil
}

// deposeFence makes commits under epoch fail at once.
func (s *Store) deposeFence(lease, node string, epoch uint64) {
	s.fence.CompareAndSwap(s.currentFence(lease, node, epoch), &fence{lease: lease, node: node, epoch: epoch, deposed: true})
}

func (s *Store) currentFence(lease, node string, epoch uint64) *fence {
	f := s.fence.Load()
	if f != nil && f.lease == lease && f.node == node && f.epoch == epoch && !f.deposed {
		return f
	}
	return nil
}

// Fence returns the node and epoch commits are fenced to, if any.
func (s *Store) Fence() (node string, epoch uint64, ok bool) {
	f := s.fence.Load()
	if f == nil {
		return "", 0, false
	}
	return f.node, f.epoch, !f.deposed
}

// currentFenceOrDeposed returns the fence a write is checked against (nil
// when the store is not fenced), or an error when it is already known to be
// lost: the write is then not sent at all.
func (s *Store) currentFenceOrDeposed() (*fence, error) {
	f := s.fence.Load()
	if f != nil && f.deposed {
		return nil, fmt.Errorf("epoch %d of node %s was deposed: %w", f.epoch, f.node, ErrNotLeader)
	}
	return f, nil
}

// queueFence adds the check of fence f (if any) to a batch, as its last
// statement before the commit: see fenceSQL.
func queueFence(pb *pgx.Batch, f *fence) {
	if f != nil {
		pb.Queue(fenceSQL, f.lease, f.node, int64(f.epoch))
	}
}

// fenceSQL refuses the transaction unless node ($2) holds epoch ($3) of the
// lease ($1) and the lease has not expired. FOR SHARE makes a takeover wait
// for the transaction (or the transaction wait for the takeover and see
// it): a commit is fenced against the lease as it is when the commit
// happens. It is a transaction's last statement, after its writes: placed
// first, it held the lease row for as long as the writes waited (on a lock
// someone else held on tasks, say), and the leader's own renewal, an UPDATE
// of that row, waited with them until the lease expired, while every other
// node's takeover waited too: the cluster lost its leader and could elect
// none until the lock went. Plain SQL, planned once; plpgsql only to refuse
// (migrations/0004_plain_checks.sql).
const fenceSQL = `SELECT sy_fence_refused($1::text, $2::text, $3::bigint) WHERE NOT EXISTS (
	SELECT FROM leases WHERE name = $1::text AND node = $2::text AND epoch = $3::bigint AND expires_at > now() FOR SHARE)`

// The statements take their rows as arrays, one per column, and turn them
// into rows with set-returning functions in the select list (a ProjectSet,
// which streams), not with unnest in FROM: a function scan in FROM stores
// its rows in a tuplestore first, whose memory, with an index scan's, took
// the backend's heap past glibc's trim threshold and back on every
// statement (12 brk calls per commit of a lone submission, a fifth of the
// backend's CPU; ADR 0005, finding 15). Both forms pad shorter arrays with
// NULLs; the arrays are always of one length.
const (
	// taskInsertSQL skips a task whose id is stored already; its first
	// event is then still a row of events (firstInRow is for COPY only).
	taskInsertSQL = `INSERT INTO tasks (seq, id, agent, lane, session, batch, parent, idem_key, labels, spec, params)
	SELECT u.seq, u.id, u.agent, u.lane, u.session, u.batch, u.parent, u.idem_key, NULLIF(u.labels, '')::bytea[], u.spec, u.params
	FROM (SELECT unnest($1::bigint[]) AS seq, unnest($2::bytea[]) AS id, unnest($3::bytea[]) AS agent, unnest($4::bytea[]) AS lane,
		unnest($5::bytea[]) AS session, unnest($6::bytea[]) AS batch, unnest($7::bytea[]) AS parent, unnest($8::bytea[]) AS idem_key,
		unnest($9::text[]) AS labels, unnest($10::bytea[]) AS spec, unnest($11::bytea[]) AS params) u
	ON CONFLICT (id) DO NOTHING`
	statusInsertSQL = `INSERT INTO task_status (seq, state, ended_at, status, result, event_seqs)
	SELECT u.seq, u.state, NULLIF(u.ended_at, 0), u.status, u.result, coalesce(NULLIF(u.evs, '')::bigint[], '{}')
	FROM (SELECT unnest($1::bigint[]) AS seq, unnest($2::smallint[]) AS state, unnest($3::bigint[]) AS ended_at,
		unnest($4::bytea[]) AS status, unnest($5::bytea[]) AS result, unnest($6::text[]) AS evs) u
	ON CONFLICT (seq) DO UPDATE SET state = excluded.state, ended_at = excluded.ended_at, status = excluded.status,
		result = excluded.result, event_seqs = task_status.event_seqs || excluded.event_seqs`
	// statusUpdateSQL updates many statuses. PostgreSQL plans it afresh at
	// every execution: its custom plan, estimated from the arrays' real
	// length, always looks cheaper than its generic one, estimated at 10
	// rows. (Forcing the generic plan is no cure: on a small table that
	// plan is a hash join over a sequential scan, and it is kept as the
	// table grows.) A commit that updates one status uses
	// statusUpdateOneSQL instead.
	statusUpdateSQL = `UPDATE task_status s SET state = u.state, ended_at = NULLIF(u.ended_at, 0), status = u.status,
		result = u.result, event_seqs = CASE WHEN u.evs = '' THEN s.event_seqs ELSE s.event_seqs || u.evs::bigint[] END
	FROM (SELECT unnest($1::bigint[]) AS seq, unnest($2::smallint[]) AS state, unnest($3::bigint[]) AS ended_at,
		unnest($4::bytea[]) AS status, unnest($5::bytea[]) AS result, unnest($6::text[]) AS evs) u
	WHERE s.seq = u.seq`
	// statusUpdateOneSQL is statusUpdateSQL for one status, by its key: it
	// has one plan, which PostgreSQL caches after its first five
	// executions. It is the common case of a lone submitter, whose commit
	// carries the end of the task before.
	statusUpdateOneSQL = `UPDATE task_status SET state = $2::smallint, ended_at = NULLIF($3::bigint, 0), status = $4::bytea,
		result = $5::bytea, event_seqs = CASE WHEN $6::text = '' THEN event_seqs ELSE event_seqs || $6::text::bigint[] END
	WHERE seq = $1::bigint`
	taskEventsSQL = `UPDATE task_status s SET event_seqs = s.event_seqs || u.evs::bigint[]
	FROM (SELECT unnest($1::bytea[]) AS id, unnest($2::text[]) AS evs) u JOIN tasks t ON t.id = u.id
	WHERE s.seq = t.seq`
	eventsSQL = `INSERT INTO events (seq, at, type, task, agent, lane, session, batch, from_state, to_state, attempt, reason, webhook)
	SELECT unnest($1::bigint[]), unnest($2::bigint[]), unnest($3::smallint[]), unnest($4::bytea[]), unnest($5::bytea[]),
		unnest($6::bytea[]), unnest($7::bytea[]), unnest($8::bytea[]), unnest($9::smallint[]), unnest($10::smallint[]),
		unnest($11::integer[]), unnest($12::bytea[]), unnest($13::boolean[])`
	batchesSQL = `INSERT INTO batches (id, parallelism, webhook_url, created_at, ended_at, webhooks)
	SELECT unnest($1::bytea[]), unnest($2::integer[]), unnest($3::bytea[]), unnest($4::bigint[]), unnest($5::bigint[]), unnest($6::bytea[])
	ON CONFLICT (id) DO UPDATE SET parallelism = excluded.parallelism, webhook_url = excluded.webhook_url,
		created_at = excluded.created_at, ended_at = excluded.ended_at, webhooks = excluded.webhooks`
	lanesSQL = `INSERT INTO lanes (name, config) SELECT unnest($1::text[]), unnest($2::bytea[])
	ON CONFLICT (name) DO UPDATE SET config = excluded.config`
	settingsSQL = `INSERT INTO settings (key, value) SELECT unnest($1::text[]), unnest($2::bytea[])
	ON CONFLICT (key) DO UPDATE SET value = excluded.value`
	settingsDelSQL = `DELETE FROM settings WHERE key = ANY($1::text[])`

	copyTasksSQL = `COPY tasks (seq, id, agent, lane, session, batch, parent, idem_key, labels, spec, params,
		first_at, first_to, first_reason, first_webhook) FROM STDIN (FORMAT binary)`
	copyStatusSQL = `COPY task_status (seq, state, ended_at, status, result, event_seqs) FROM STDIN (FORMAT binary)`
	copyEventsSQL = `COPY events (seq, at, type, task, agent, lane, session, batch, from_state, to_state, attempt, reason, webhook) FROM STDIN (FORMAT binary)`
)

// byteas is a bytea[] parameter. pgx encodes a FlatArray without
// reflection; a [][]byte it walks with reflect, allocating as it goes
// (BenchmarkCommit's pipelined commits of 100 tasks: 8,745 allocations
// before, 7,826 with it).
type byteas = pgtype.FlatArray[[]byte]

// commitRows are a batch's rows as column arrays.
type commitRows struct {
	newTasks struct {
		seq                                                  []int64
		id, agent, lane, session, batch, parent, idem, specs byteas
		labels                                               []string
		params                                               byteas
	}
	newStatus, oldStatus statusRows
	extraEvents          struct {
		id  byteas
		evs []string
	}
	events struct {
		seq, at                                   []int64
		typ, from, to                             []int16
		task, agent, lane, session, batch, reason byteas
		attempt                                   []int32
		webhook                                   []bool
	}
	maxTask uint64

	// For COPY: the new rows' payloads, and the batches of the new tasks.
	copy       bool
	cp         *copyRowsBuf
	newBatches []string
}

type statusRows struct {
	seq, ended     []int64
	state          []int16
	status, result byteas
	evs            []string
}

func (r *statusRows) add(t *engine.Task, status []byte, evs string) {
	r.seq = append(r.seq, int64(t.Seq))
	r.state = append(r.state, int16(t.State))
	r.ended = append(r.ended, endedAt(t))
	r.status = append(r.status, status)
	r.result = append(r.result, t.Result)
	r.evs = append(r.evs, evs)
}

// endedAt is the end of a terminal task (its EndedAt, else its last update),
// or 0 (NULL) for a live one: the column says "terminal" and orders purges.
func endedAt(t *engine.Task) int64 {
	if !t.State.Terminal() {
		return 0
	}
	if at := unixNano(t.EndedAt); at != 0 {
		return at
	}
	return max(unixNano(t.UpdatedAt), 1)
}

// Commit implements engine.Store.
func (s *Store) Commit(ctx context.Context, b *engine.Batch) error {
	if b.Empty() {
		return nil
	}
	var prev uint64
	for i := range b.Events {
		if seq := b.Events[i].Seq; i > 0 && seq <= prev {
			return fmt.Errorf("postgres store: commit: event seq %d does not follow %d", seq, prev)
		}
		prev = b.Events[i].Seq
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed() {
		return errClosed
	}
	f, err := s.currentFenceOrDeposed()
	if err != nil {
		return err
	}
	if err := s.syncEpochLocked(ctx); err != nil {
		return err
	}
	rows, err := s.rowsLocked(b)
	if err != nil {
		return fmt.Errorf("postgres store: commit: %w", err)
	}
	if rows.copy {
		err = s.commitCopy(ctx, f, b, rows, 0, nil, nil)
	} else {
		pb := &pgx.Batch{}
		s.queueRows(pb, b, rows, 0)
		queueFence(pb, f)
		err = s.pool.SendBatch(ctx, pb).Close()
	}
	if err != nil {
		s.maxTaskSeq = s.committedMax
		return s.commitError(ctx, err)
	}
	s.maxTaskSeq = rows.maxTask
	s.committedMax = rows.maxTask
	return nil
}

// commitError says why a commit failed (under wmu).
func (s *Store) commitError(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	errors.As(err, &pgErr)
	switch {
	case isFenced(err):
		return fmt.Errorf("%s: %w", pgErr.Message, ErrNotLeader)
	case pgErr != nil && pgErr.Code == codeSeq:
		return fmt.Errorf("postgres store: commit: %s", pgErr.Message)
	case pgErr != nil && pgErr.Code == codeUnique:
		// Tasks this store thought new were there: another node committed
		// them. Learn the highest seq again for the retry.
		_ = s.loadMaxTaskSeq(ctx)
	}
	return s.describe("commit", err)
}

// asyncCommit is a commit started by CommitAsync.
type asyncCommit struct {
	last    uint64        // the batch's last event seq; 0: it has none
	maxTask uint64        // the highest task seq once it is committed
	epoch   uint64        // the fence epoch it was sent under
	locked  chan struct{} // closed once the transaction holds the seq lock (or failed before)
	lockErr error         // why it failed before that, if it did
	done    chan struct{} // closed once it is committed or failed
	err     error
}

// CommitAsync implements engine.PipelinedStore. A batch sent while the one
// before it is in flight checks its seq with followSQL rather than
// advanceSQL: the seq row that the earlier transaction locked makes it wait
// for that one's end, and unless that one committed (the last seq is
// exactly its last), it fails. It takes the seq lock only once the earlier
// transaction holds it, so that the two cannot take it out of order.
//
// Where in the transaction it takes the lock depends on what it writes. A
// batch that updates stored rows takes it first: its rows are built and
// sent while the earlier one runs and syncs, and the server starts on them
// the moment the earlier one commits. A batch that only adds rows (by COPY)
// takes it last: the server writes its rows while the earlier one still
// runs, and only its seq check, its last statements and its own sync wait
// for that one's end. It contends with the earlier one for no other row, so
// the two cannot deadlock; one that updates rows, with the lock last, could
// take a row lock before the earlier one and then wait for it.
func (s *Store) CommitAsync(ctx context.Context, b *engine.Batch) (done <-chan struct{}, wait func() error) {
	failed := func(err error) (<-chan struct{}, func() error) { return closedChan, func() error { return err } }
	if b.Empty() {
		return failed(nil)
	}
	var prevSeq uint64
	for i := range b.Events {
		if seq := b.Events[i].Seq; i > 0 && seq <= prevSeq {
			return failed(fmt.Errorf("postgres store: commit: event seq %d does not follow %d", seq, prevSeq))
		}
		prevSeq = b.Events[i].Seq
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed() {
		return failed(errClosed)
	}
	pred := s.inflight
	if pred != nil {
		select {
		case <-pred.done:
			pred = nil
		default:
		}
	}
	if f := s.fence.Load(); pred != nil && (pred.last == 0 || len(b.Events) == 0 || f != nil && f.epoch != s.fenceEpoch) {
		// Only a batch with events can check that the one before it, which
		// must have events too, committed: otherwise wait for that one.
		<-pred.done
		pred = nil
	}
	f, err := s.currentFenceOrDeposed()
	if err != nil {
		return s.failAsync(err)
	}
	if err := s.syncEpochLocked(ctx); err != nil {
		return s.failAsync(err)
	}
	if c := s.inflight; pred == nil && c != nil && isClosed(c.done) && c.err != nil {
		if c.epoch == s.fenceEpoch {
			// The batch before this one failed, and its caller has not yet
			// taken the news (its wait): this one was built to follow it
			// and must not commit without it. Sent as a first batch, with
			// advanceSQL, it would commit over the gap, and the retried
			// batch before it could then never follow.
			return s.failAsync(fmt.Errorf("postgres store: commit: the commit before failed: %w", c.err))
		}
		// It failed under an earlier leadership, whose engine is gone and
		// will not retry it: this batch starts afresh.
		s.inflight = nil
	}
	rows, err := s.rowsLocked(b)
	if err != nil {
		return s.failAsync(fmt.Errorf("postgres store: commit: %w", err))
	}
	var follow uint64
	// A batch that only adds rows (new tasks, their first statuses and
	// events, new batches) cannot contend with the transaction before it
	// for any row but the seq row: it takes that lock last, after its rows
	// are written, so that its COPYs run while the earlier transaction
	// still runs and syncs (findings 5 and 16 of ADR 0005).
	var lockAfter *asyncCommit
	if pred != nil {
		follow = pred.last
		if rows.copy && rows.addsOnly(b) {
			lockAfter = pred
		} else {
			<-pred.locked
			if pred.lockErr != nil {
				return s.failAsync(fmt.Errorf("postgres store: commit: the commit before failed: %w", pred.lockErr))
			}
		}
	}
	c := &asyncCommit{maxTask: rows.maxTask, epoch: s.fenceEpoch, locked: make(chan struct{}), done: make(chan struct{})}
	if n := len(b.Events); n > 0 {
		c.last = b.Events[n-1].Seq
	}
	s.maxTaskSeq = rows.maxTask
	s.inflight = c
	if rows.copy {
		go func() {
			c.err = s.commitCopy(ctx, f, b, rows, follow, lockAfter, func(err error) {
				c.lockErr = err
				close(c.locked)
			})
			close(c.done)
		}()
	} else {
		pb := &pgx.Batch{}
		s.queueRows(pb, b, rows, follow)
		queueFence(pb, f)
		lead := 0 // the statements up to the seq lock: the seq check
		if len(b.Events) > 0 {
			lead++
		}
		go func() {
			br := s.pool.SendBatch(ctx, pb)
			var err error
			for range lead {
				if _, err = br.Exec(); err != nil {
					break
				}
			}
			c.lockErr = err
			close(c.locked)
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			c.err = err
			close(c.done)
		}()
	}
	return c.done, func() error {
		<-c.done
		s.wmu.Lock()
		defer s.wmu.Unlock()
		if s.inflight == c {
			s.inflight = nil
		}
		if c.epoch != s.fenceEpoch {
			// Taken late, by an engine abandoned with an earlier
			// leadership: what this store knows of the seqs belongs to the
			// leadership since.
			if c.err != nil {
				return s.describe("commit", c.err)
			}
			return nil
		}
		if c.err != nil {
			// The batches sent after it fail too: they are built again.
			s.maxTaskSeq = s.committedMax
			return s.commitError(ctx, c.err)
		}
		s.committedMax = max(s.committedMax, c.maxTask)
		s.maxTaskSeq = max(s.maxTaskSeq, c.maxTask)
		return nil
	}
}

// failAsync is the outcome of a batch that CommitAsync did not send (under
// wmu): the batches sent after it are built again.
func (s *Store) failAsync(err error) (<-chan struct{}, func() error) {
	s.maxTaskSeq = s.committedMax
	return closedChan, func() error { return err }
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closedChan is the done channel of an outcome known at once.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// rowsLocked turns a batch into column arrays, or for COPY (r.copy) into
// the COPY payloads of its new rows. A task above the highest stored seq is
// new (a row in tasks and one in task_status); any other only updates its
// status. A task twice in the batch is written once, as its later snapshot.
func (s *Store) rowsLocked(b *engine.Batch) (*commitRows, error) {
	r := &commitRows{maxTask: s.maxTaskSeq}
	r.copy = s.useCopy(b)
	// Only COPY writes first events in the tasks' rows: the pipelined
	// statement skips a task whose id is stored (ON CONFLICT), which would
	// drop its first event with it, and a small commit gains little.
	inRow := r.copy && s.firstInRow.Load()
	var folded []bool // per event: written in its task's row
	// Per task id: its last snapshot in the batch and its events, chained
	// through next (one map and one slice for the batch, nothing per task).
	refs := make(map[string]taskRef, len(b.Tasks))
	next := make([]int32, len(b.Events))
	evIDs := 0
	for i := range b.Events {
		id := b.Events[i].TaskID
		if id == "" {
			continue
		}
		ref := refs[id]
		if ref.n == 0 {
			ref.first = int32(i)
			evIDs++
		} else {
			next[ref.last] = int32(i)
		}
		ref.last = int32(i)
		ref.n++
		refs[id] = ref
	}
	for i, t := range b.Tasks {
		ref := refs[t.ID]
		ref.task = int32(i) + 1
		refs[t.ID] = ref
	}
	seqsOf := func(dst []uint64, ref taskRef) []uint64 {
		for i, k := ref.first, int32(0); k < ref.n; i, k = next[i], k+1 {
			dst = append(dst, b.Events[i].Seq)
		}
		return dst
	}
	var (
		lit     []byte
		seqs    []uint64
		carried int // task ids with events that the batch carries
		docs    []byte
	)
	if r.copy {
		r.cp = getCopyRows()
	} else {
		// The JSON documents share one buffer: a full slice expression keeps
		// each its own, and a reallocation leaves the earlier ones where they are.
		docs = make([]byte, 0, 320*len(b.Tasks))
	}
	for i, t := range b.Tasks {
		ref := refs[t.ID]
		if ref.task != int32(i)+1 {
			continue
		}
		if ref.n > 0 {
			carried++
		}
		// seqs is one buffer for the batch: each use below reads it
		// before the next task's seqs replace them.
		seqs = seqsOf(seqs[:0], ref)
		if t.Seq <= s.maxTaskSeq {
			lit = seqsLiteral(lit[:0], seqs)
			start := len(docs)
			docs = sqlcodec.AppendStatus(docs, t)
			r.oldStatus.add(t, docs[start:len(docs):len(docs)], string(lit))
			continue
		}
		r.maxTask = max(r.maxTask, t.Seq)
		var first *engine.Event
		if inRow && ref.n > 0 && firstInRow(t, &b.Events[ref.first]) {
			first = &b.Events[ref.first]
			if folded == nil {
				folded = make([]bool, len(b.Events))
			}
			folded[ref.first] = true
		}
		if r.copy {
			if err := r.cp.addTask(t, seqs, first); err != nil {
				return nil, fmt.Errorf("task %s: encode spec: %w", t.ID, err)
			}
			r.newBatch(t.Spec.BatchID)
			continue
		}
		lit = seqsLiteral(lit[:0], seqs)
		start := len(docs)
		docs = sqlcodec.AppendStatus(docs, t)
		status := docs[start:len(docs):len(docs)]
		start = len(docs)
		var err error
		docs, err = sqlcodec.AppendSpec(docs, t.Spec)
		if err != nil {
			return nil, fmt.Errorf("task %s: encode spec: %w", t.ID, err)
		}
		spec := docs[start:len(docs):len(docs)]
		var params []byte
		if t.Spec.Action != nil {
			params = t.Spec.Action.Params
		}
		nt := &r.newTasks
		nt.seq = append(nt.seq, int64(t.Seq))
		nt.id = append(nt.id, []byte(t.ID))
		nt.agent = append(nt.agent, []byte(t.Spec.AgentID))
		nt.lane = append(nt.lane, []byte(t.Spec.Lane))
		nt.session = append(nt.session, bytesOrNil(t.Spec.Session()))
		nt.batch = append(nt.batch, bytesOrNil(t.Spec.BatchID))
		nt.parent = append(nt.parent, bytesOrNil(t.Spec.ParentID))
		nt.idem = append(nt.idem, bytesOrNil(t.Spec.IdempotencyKey))
		nt.labels = append(nt.labels, labelsLiteral(t.Spec.Labels))
		nt.specs = append(nt.specs, spec)
		nt.params = append(nt.params, params)
		r.newStatus.add(t, status, string(lit))
	}
	if carried < evIDs {
		for id, ref := range refs { // events of tasks the batch does not carry
			if ref.task != 0 || ref.n == 0 {
				continue
			}
			r.extraEvents.id = append(r.extraEvents.id, []byte(id))
			r.extraEvents.evs = append(r.extraEvents.evs, string(seqsLiteral(nil, seqsOf(nil, ref))))
		}
	}
	if r.copy {
		r.cp.addEvents(b.Events, folded)
		return r, nil
	}
	ev := &r.events
	for i := range b.Events {
		e := &b.Events[i]
		ev.seq = append(ev.seq, int64(e.Seq))
		ev.at = append(ev.at, unixNano(e.At))
		ev.typ = append(ev.typ, int16(e.Type))
		ev.task = append(ev.task, bytesOrNil(e.TaskID))
		ev.agent = append(ev.agent, bytesOrNil(e.AgentID))
		ev.lane = append(ev.lane, bytesOrNil(e.Lane))
		ev.session = append(ev.session, bytesOrNil(e.SessionKey))
		ev.batch = append(ev.batch, bytesOrNil(e.BatchID))
		ev.from = append(ev.from, int16(e.From))
		ev.to = append(ev.to, int16(e.To))
		ev.attempt = append(ev.attempt, int32(e.Attempt))
		ev.reason = append(ev.reason, bytesOrNil(e.Reason))
		ev.webhook = append(ev.webhook, e.Webhook)
	}
	return r, nil
}

// taskRef is what rowsLocked knows of a task id in a batch: its last
// snapshot (index + 1; 0 for none) and its events (the first and last
// index, chained, and how many).
type taskRef struct {
	task, first, last, n int32
}

// newBatch notes the batch of a new task written by COPY (for addsOnly): a
// batch's tasks are admitted together, so their ids follow each other.
func (r *commitRows) newBatch(id string) {
	if id != "" && (len(r.newBatches) == 0 || r.newBatches[len(r.newBatches)-1] != id) {
		r.newBatches = append(r.newBatches, id)
	}
}

// firstInRow reports whether e, an event of the new task t, is its first
// event in a shape t's row holds (the columns of migration 0005): the
// state it was admitted in, with the task's own agent, lane, session and
// batch. Events reads it back from the row (eventsSelectSQL).
func firstInRow(t *engine.Task, e *engine.Event) bool {
	return e.Seq == t.Seq && e.Type == engine.EventState && e.From == 0 && e.Attempt == 0 &&
		e.TaskID == t.ID && e.AgentID == t.Spec.AgentID && e.Lane == t.Spec.Lane &&
		e.SessionKey == t.Spec.Session() && e.BatchID == t.Spec.BatchID
}

// addTask writes a new task's row in tasks, with its first event when first
// is not nil, and its first row in task_status, as copyRows wrote them from
// the column arrays.
func (c *copyRowsBuf) addTask(t *engine.Task, seqs []uint64, first *engine.Event) error {
	c.newTasks++
	tb := &c.tasks
	tb.row(15)
	tb.int8(int64(t.Seq))
	tb.text(t.ID)
	tb.text(t.Spec.AgentID)
	tb.text(t.Spec.Lane)
	tb.textOrNull(t.Spec.Session())
	tb.textOrNull(t.Spec.BatchID)
	tb.textOrNull(t.Spec.ParentID)
	tb.textOrNull(t.Spec.IdempotencyKey)
	tb.labels(t.Spec.Labels)
	at := tb.open()
	var err error
	if tb.b, err = sqlcodec.AppendSpec(tb.b, t.Spec); err != nil {
		return err
	}
	tb.arrayEnd(at)
	var params []byte
	if t.Spec.Action != nil {
		params = t.Spec.Action.Params
	}
	tb.bytea(params)
	if first != nil {
		tb.int8(unixNano(first.At))
		tb.int2(int16(first.To))
		tb.textOrNull(first.Reason)
		tb.bool(first.Webhook)
	} else {
		tb.null()
		tb.null()
		tb.null()
		tb.null()
	}

	sb := &c.status
	sb.row(6)
	sb.int8(int64(t.Seq))
	sb.int2(int16(t.State))
	sb.int8OrNull(endedAt(t))
	at = sb.open()
	sb.b = sqlcodec.AppendStatus(sb.b, t)
	sb.arrayEnd(at)
	sb.bytea(t.Result)
	sb.int8Array(seqs)
	return nil
}

// addEvents writes the batch's events but those folded into their tasks'
// rows (folded, by index; nil for none).
func (c *copyRowsBuf) addEvents(events []engine.Event, folded []bool) {
	eb := &c.events
	for i := range events {
		if folded != nil && folded[i] {
			continue
		}
		c.newEvents++
		e := &events[i]
		eb.row(13)
		eb.int8(int64(e.Seq))
		eb.int8(unixNano(e.At))
		eb.int2(int16(e.Type))
		eb.textOrNull(e.TaskID)
		eb.textOrNull(e.AgentID)
		eb.textOrNull(e.Lane)
		eb.textOrNull(e.SessionKey)
		eb.textOrNull(e.BatchID)
		eb.int2(int16(e.From))
		eb.int2(int16(e.To))
		eb.int4(int32(e.Attempt))
		eb.textOrNull(e.Reason)
		eb.bool(e.Webhook)
	}
}

// The seq check and lock: one UPDATE of last_seq, planned once, whose CASE
// takes the slow path (sy_seq_refused, plpgsql: it waits for the row and
// looks again, or refuses the transaction) only when the value it read does
// not pass. advanceSQL moves the last seq to $2 unless $1 does not follow
// it; followSQL, for a commit sent while the one before it is in flight,
// also wants the last seq to be exactly $1, that commit's last (so it
// fails if that one failed). See migrations/0004_plain_checks.sql.
const (
	advanceSQL = `UPDATE meta SET value = CASE WHEN value < $1::bigint THEN $2::bigint
		ELSE sy_seq_refused(NULL, $1::bigint, $2::bigint) END WHERE key = 'last_seq'`
	followSQL = `UPDATE meta SET value = CASE WHEN value = $1::bigint AND value < $2::bigint THEN $3::bigint
		ELSE sy_seq_refused($1::bigint, $2::bigint, $3::bigint) END WHERE key = 'last_seq'`
)

// queueAdvance adds the seq check and lock: advanceSQL, or with follow
// (the last seq of a commit still in flight) followSQL.
func queueAdvance(pb *pgx.Batch, b *engine.Batch, follow uint64) {
	n := len(b.Events)
	switch {
	case n == 0:
	case follow != 0:
		pb.Queue(followSQL, int64(follow), int64(b.Events[0].Seq), int64(b.Events[n-1].Seq))
	default:
		pb.Queue(advanceSQL, int64(b.Events[0].Seq), int64(b.Events[n-1].Seq))
	}
}

// queueRows adds the batch's statements (the fence check comes after them).
func (s *Store) queueRows(pb *pgx.Batch, b *engine.Batch, r *commitRows, follow uint64) {
	queueAdvance(pb, b, follow)
	if len(b.Batches) > 0 {
		queueBatches(pb, b.Batches)
	}
	if nt := &r.newTasks; len(nt.seq) > 0 {
		pb.Queue(taskInsertSQL, nt.seq, nt.id, nt.agent, nt.lane, nt.session, nt.batch, nt.parent, nt.idem, nt.labels, nt.specs, nt.params)
		st := &r.newStatus
		pb.Queue(statusInsertSQL, st.seq, st.state, st.ended, st.status, st.result, st.evs)
	}
	queueStatusUpdates(pb, &r.oldStatus)
	if x := &r.extraEvents; len(x.id) > 0 {
		pb.Queue(taskEventsSQL, x.id, x.evs)
	}
	if ev := &r.events; len(ev.seq) > 0 {
		pb.Queue(eventsSQL, ev.seq, ev.at, ev.typ, ev.task, ev.agent, ev.lane, ev.session, ev.batch, ev.from, ev.to,
			ev.attempt, ev.reason, ev.webhook)
	}
	if len(b.Lanes) > 0 {
		queueLanes(pb, b.Lanes)
	}
	if len(b.Settings) > 0 {
		queueSettings(pb, b.Settings)
	}
	if n := len(b.Events); n > 0 && !s.noNotify.Load() {
		pb.Queue("SELECT pg_notify($1, $2)", s.channels.events, strconv.FormatUint(b.Events[n-1].Seq, 10))
	}
}

// queueStatusUpdates updates the statuses of stored tasks: one by its key
// (statusUpdateOneSQL), more in one statement.
func queueStatusUpdates(pb *pgx.Batch, st *statusRows) {
	switch len(st.seq) {
	case 0:
	case 1:
		pb.Queue(statusUpdateOneSQL, st.seq[0], st.state[0], st.ended[0], st.status[0], st.result[0], st.evs[0])
	default:
		pb.Queue(statusUpdateSQL, st.seq, st.state, st.ended, st.status, st.result, st.evs)
	}
}

// queueBatches upserts batch descriptions, the last of each id winning.
func queueBatches(pb *pgx.Batch, in []engine.BatchInfo) {
	last := make(map[string]int, len(in))
	for i := range in {
		last[in[i].ID] = i
	}
	var (
		id, hook, webhooks byteas
		par                []int32
		created, ended     []int64
	)
	for i := range in {
		bi := &in[i]
		if last[bi.ID] != i {
			continue
		}
		var wh []byte
		if len(bi.Webhooks) > 0 {
			wh, _ = json.Marshal(bi.Webhooks)
		}
		id = append(id, []byte(bi.ID))
		par = append(par, int32(bi.Parallelism))
		hook = append(hook, bytesOrNil(bi.WebhookURL))
		created = append(created, unixNano(bi.CreatedAt))
		ended = append(ended, unixNano(bi.EndedAt))
		webhooks = append(webhooks, wh)
	}
	pb.Queue(batchesSQL, id, par, hook, created, ended, webhooks)
}

func queueLanes(pb *pgx.Batch, in []engine.LaneConfig) {
	last := make(map[string]int, len(in))
	for i := range in {
		last[in[i].Name] = i
	}
	var names []string
	var cfgs byteas
	for i := range in {
		if last[in[i].Name] != i {
			continue
		}
		cfg, _ := encodeLane(&in[i])
		names = append(names, in[i].Name)
		cfgs = append(cfgs, cfg)
	}
	pb.Queue(lanesSQL, names, cfgs)
}

// queueSettings writes settings in order: a nil value deletes.
func queueSettings(pb *pgx.Batch, in []engine.Setting) {
	last := make(map[string]int, len(in))
	for i := range in {
		last[in[i].Key] = i
	}
	var keys, dels []string
	var vals byteas
	for i, set := range in {
		if last[set.Key] != i {
			continue
		}
		if set.Value == nil {
			dels = append(dels, set.Key)
			continue
		}
		keys = append(keys, set.Key)
		vals = append(vals, set.Value)
	}
	if len(dels) > 0 {
		pb.Queue(settingsDelSQL, dels)
	}
	if len(keys) > 0 {
		pb.Queue(settingsSQL, keys, vals)
	}
}

// isFenced reports whether err is the fence's refusal (fenceSQL).
func isFenced(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeFenced
}

// defaultCopyMin: below this many new rows a commit is one round trip (a
// pgx.Batch); from it on, COPY's lower server cost per row wins (see the
// ADR for the figures).
const defaultCopyMin = 512

// useCopy reports whether a batch's new rows go in with COPY. New tasks
// count twice (a row in tasks and one in task_status).
func (s *Store) useCopy(b *engine.Batch) bool {
	rows := len(b.Events)
	if rows >= s.copyMin {
		return true
	}
	for _, t := range b.Tasks {
		if t.Seq > s.maxTaskSeq {
			rows += 2
		}
	}
	return rows >= s.copyMin
}

// commitCopy writes a batch in an explicit transaction, with COPY for the
// new rows (tasks, task_status, events) and a pgx.Batch for the rest: more
// round trips than queueRows, fewer server-side per-row costs. The
// benchmarks compare the two (see the ADR). locked, if not nil, learns when
// the transaction holds the seq lock (or why it failed before).
func (s *Store) commitCopy(ctx context.Context, f *fence, b *engine.Batch, r *commitRows, follow uint64, lockAfter *asyncCommit, locked func(error)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		if locked != nil {
			locked(err)
		}
		return err
	}
	// The transaction begins in the first pipeline and commits in the last:
	// four round trips with the three COPYs in between, not six.
	committed := false
	defer func() {
		if !committed {
			// Best effort: the pool drops a connection left in a transaction.
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		conn.Release()
	}()
	tx := conn.Conn()
	head := &pgx.Batch{}
	head.Queue("BEGIN")
	if lockAfter == nil {
		queueAdvance(head, b, follow)
		if len(b.Batches) > 0 {
			queueBatches(head, b.Batches)
		}
	}
	err = tx.SendBatch(ctx, head).Close()
	if lockAfter == nil && locked != nil {
		locked(err)
	}
	if err != nil {
		if lockAfter != nil && locked != nil {
			locked(err)
		}
		return err
	}
	if err := s.copyRows(ctx, tx.PgConn(), r, b); err != nil {
		if lockAfter != nil && locked != nil {
			locked(err)
		}
		return err
	}
	r.cp.release()
	r.cp = nil
	rest := &pgx.Batch{}
	if lockAfter != nil {
		// Rows written, the seq lock: in turn, after the transaction before
		// this one holds it (it then waits for that one's end).
		<-lockAfter.locked
		if lockAfter.lockErr != nil {
			err := fmt.Errorf("the commit before failed: %w", lockAfter.lockErr)
			if locked != nil {
				locked(err)
			}
			return err
		}
		queueAdvance(rest, b, follow)
		if len(b.Batches) > 0 {
			queueBatches(rest, b.Batches)
		}
	}
	queueStatusUpdates(rest, &r.oldStatus)
	if x := &r.extraEvents; len(x.id) > 0 {
		rest.Queue(taskEventsSQL, x.id, x.evs)
	}
	if len(b.Lanes) > 0 {
		queueLanes(rest, b.Lanes)
	}
	if len(b.Settings) > 0 {
		queueSettings(rest, b.Settings)
	}
	if n := len(b.Events); n > 0 && !s.noNotify.Load() {
		rest.Queue("SELECT pg_notify($1, $2)", s.channels.events, strconv.FormatUint(b.Events[n-1].Seq, 10))
	}
	queueFence(rest, f)
	rest.Queue("COMMIT")
	br := tx.SendBatch(ctx, rest)
	if lockAfter != nil {
		// The seq check is the tail's first statement: once it has answered,
		// this transaction holds the lock (or has failed).
		_, err := br.Exec()
		if locked != nil {
			locked(err)
		}
		if err != nil {
			_ = br.Close()
			return err
		}
	}
	if err := br.Close(); err != nil {
		return err
	}
	committed = true
	return nil
}

// copyRows writes the new tasks, their statuses and the events by COPY
// (their payloads written by rowsLocked).
func (s *Store) copyRows(ctx context.Context, conn *pgconn.PgConn, r *commitRows, b *engine.Batch) error {
	cp := r.cp
	if cp.newTasks > 0 {
		cp.tasks.end()
		if err := cp.tasks.copyIn(ctx, conn, copyTasksSQL); err != nil {
			return err
		}
		cp.status.end()
		if err := cp.status.copyIn(ctx, conn, copyStatusSQL); err != nil {
			return err
		}
	}
	if cp.newEvents > 0 {
		cp.events.end()
		if err := cp.events.copyIn(ctx, conn, copyEventsSQL); err != nil {
			return err
		}
	}
	return nil
}

// addsOnly reports whether a batch only adds rows: every task in it is new,
// and the batches it writes are those its new tasks belong to and have not
// ended. Such a commit contends with no other for any row but the seq row.
func (r *commitRows) addsOnly(b *engine.Batch) bool {
	if len(r.oldStatus.seq) > 0 || len(r.extraEvents.id) > 0 || len(b.Lanes) > 0 || len(b.Settings) > 0 {
		return false
	}
	if len(b.Batches) == 0 {
		return true
	}
	// A batch's tasks are admitted together: their ids follow each other.
	fresh := make(map[string]struct{}, len(b.Batches))
	for _, id := range r.newBatches {
		fresh[id] = struct{}{}
	}
	for i := range b.Batches {
		bi := &b.Batches[i]
		if _, ok := fresh[bi.ID]; !ok || !bi.EndedAt.IsZero() || len(bi.Webhooks) > 0 {
			return false
		}
	}
	return true
}
