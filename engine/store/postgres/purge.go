package postgres

// Retention. Purge deletes a bounded number of ended tasks per call, found
// through the ended_at index, with their events and the batches they leave
// empty, in one statement; then events of no task and commands completed
// before the cutoff, a bounded number of each: the
// engine calls it in a loop, so a large purge is many short transactions
// and never holds up commits for long.

import (
	"context"
	"time"
)

const purgeSQL = `WITH victims AS (
	SELECT seq FROM task_status WHERE ended_at < $1 ORDER BY ended_at LIMIT $2 FOR UPDATE
), st AS (
	DELETE FROM task_status s USING victims v WHERE s.seq = v.seq RETURNING s.event_seqs
), tk AS (
	DELETE FROM tasks t USING victims v WHERE t.seq = v.seq RETURNING t.batch
), ev AS (
	DELETE FROM events WHERE seq IN (SELECT unnest(event_seqs) FROM st)
), bt AS (
	DELETE FROM batches b WHERE b.id IN (SELECT batch FROM tk WHERE batch IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.batch = b.id AND t.seq NOT IN (SELECT seq FROM victims))
)
SELECT count(*) FROM st`

// purgeTasklessSQL deletes events of no task (lane and engine events) from
// before the cutoff, oldest first.
const purgeTasklessSQL = `DELETE FROM events WHERE seq IN
	(SELECT seq FROM events WHERE task IS NULL AND at < $1 ORDER BY seq LIMIT $2)`

const purgeCommandsSQL = `DELETE FROM commands WHERE id IN
	(SELECT id FROM commands WHERE done_at < $1 ORDER BY done_at LIMIT $2)`

// CommandRetention is how long a completed command is kept: long enough for
// the node that sent it to read the answer (it waits 10 s by default).
const CommandRetention = 10 * time.Minute

// Purge implements engine.Store. It also deletes up to limit events of no
// task from before the cutoff, and up to limit commands that were completed
// before the cutoff or CommandRetention ago, whichever is later.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 || before.IsZero() {
		return 0, nil
	}
	if s.closed() {
		return 0, errClosed
	}
	var n int64
	if err := s.pool.QueryRow(ctx, purgeSQL, before.UnixNano(), int64(limit)).Scan(&n); err != nil {
		return 0, s.describe("purge", err)
	}
	if _, err := s.pool.Exec(ctx, purgeTasklessSQL, before.UnixNano(), int64(limit)); err != nil {
		return int(n), s.describe("purge events of no task", err)
	}
	cmdBefore := time.Now().Add(-CommandRetention)
	if before.After(cmdBefore) {
		cmdBefore = before
	}
	if _, err := s.pool.Exec(ctx, purgeCommandsSQL, cmdBefore, int64(limit)); err != nil {
		return int(n), s.describe("purge commands", err)
	}
	return int(n), nil
}
