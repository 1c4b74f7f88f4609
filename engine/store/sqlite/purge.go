package sqlite

// Retention. Purge deletes a bounded number of ended tasks per call, found
// through the ended_at index, with their events and the batches left empty,
// in one short transaction: the engine calls it in a loop, and commits get
// the writer between two calls, so a large purge never stalls dispatch.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/switchyard/switchyard/engine"
)

// Purge implements engine.Store.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 || before.IsZero() {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	w := s.w
	if w == nil {
		return 0, errClosed
	}
	n, err := w.purge(before.UnixNano(), limit)
	if err != nil {
		if !w.c.GetAutocommit() {
			_ = w.rollback.Exec()
		}
		return 0, s.describe(fmt.Errorf("purge: %w", err))
	}
	return n, nil
}

func (w *writer) purge(before int64, limit int) (int, error) {
	if err := w.begin.Exec(); err != nil {
		return 0, err
	}
	sel, _, err := w.c.Prepare(`SELECT seq, batch, event_seqs FROM tasks WHERE ended_at < ? ORDER BY ended_at LIMIT ?`)
	if err != nil {
		return 0, err
	}
	defer sel.Close() //nolint:errcheck
	_ = sel.BindInt64(1, before)
	_ = sel.BindInt(2, limit)
	var (
		taskSeqs []int64
		batches  []string
		evSeqs   []uint64
	)
	for sel.Step() {
		taskSeqs = append(taskSeqs, sel.ColumnInt64(0))
		if b := sel.ColumnText(1); b != "" {
			batches = append(batches, b)
		}
		evSeqs = decodeSeqs(evSeqs, sel.ColumnRawBlob(2))
	}
	if err := sel.Reset(); err != nil {
		return 0, fmt.Errorf("select: %w", err)
	}
	if err := w.purgeTaskless(before, tasklessChunks); err != nil {
		return 0, fmt.Errorf("events of no task: %w", err)
	}
	if len(taskSeqs) == 0 {
		return 0, w.commit.Exec()
	}
	del, _, err := w.c.Prepare("DELETE FROM tasks WHERE seq = ?")
	if err != nil {
		return 0, err
	}
	defer del.Close() //nolint:errcheck
	for _, seq := range taskSeqs {
		_ = del.BindInt64(1, seq)
		if err := del.Exec(); err != nil {
			return 0, fmt.Errorf("delete task %d: %w", seq, err)
		}
	}
	if err := w.purgeEvents(evSeqs); err != nil {
		return 0, err
	}
	slices.Sort(batches)
	if len(batches) > 0 {
		delB, _, err := w.c.Prepare("DELETE FROM batches WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM tasks WHERE batch = ?1)")
		if err != nil {
			return 0, err
		}
		defer delB.Close() //nolint:errcheck
		for _, b := range slices.Compact(batches) {
			_ = delB.BindText(1, b)
			if err := delB.Exec(); err != nil {
				return 0, fmt.Errorf("delete batch %s: %w", b, err)
			}
		}
	}
	return len(taskSeqs), w.commit.Exec()
}

// tasklessChunks bounds the event chunks one Purge call reads for events of
// no task.
const tasklessChunks = 16

// purgeTaskless removes the events of no task (lane and engine events) that
// happened before the cutoff. It reads the chunks in seq order, which is
// time order, from the first it has not yet swept clean (w.tasklessSwept,
// kept in memory: after a restart the sweep starts over once), and stops
// at the first chunk that reaches the cutoff or after maxChunks chunks.
func (w *writer) purgeTaskless(before int64, maxChunks int) error {
	sel, _, err := w.c.Prepare("SELECT first_seq, last_seq, data FROM events WHERE first_seq > ? ORDER BY first_seq LIMIT ?")
	if err != nil {
		return err
	}
	defer sel.Close() //nolint:errcheck
	_ = sel.BindInt64(1, int64(w.tasklessSwept))
	_ = sel.BindInt(2, maxChunks)
	type chunk struct {
		first, last uint64
		events      []engine.Event
	}
	var chunks []chunk
	for sel.Step() {
		evs, err := decodeEvents(nil, sel.ColumnRawBlob(2), nil)
		if err != nil {
			return fmt.Errorf("event chunk %d: %w", sel.ColumnInt64(0), err)
		}
		chunks = append(chunks, chunk{uint64(sel.ColumnInt64(0)), uint64(sel.ColumnInt64(1)), evs})
		if n := len(evs); n > 0 && evs[n-1].At.UnixNano() >= before {
			break // the chunks after it are newer still
		}
	}
	if err := sel.Reset(); err != nil {
		return err
	}
	if len(chunks) == 0 {
		return nil
	}
	ed, err := w.chunkEditor()
	if err != nil {
		return err
	}
	defer ed.close()
	for _, c := range chunks {
		kept := slices.DeleteFunc(slices.Clone(c.events), func(e engine.Event) bool {
			return e.TaskID == "" && e.At.UnixNano() < before
		})
		if len(kept) < len(c.events) {
			if err := ed.replace(c.first, kept); err != nil {
				return err
			}
		}
		if n := len(c.events); n == 0 || c.events[n-1].At.UnixNano() < before {
			// Every event of the chunk is older than the cutoff: no event of
			// no task is left in it, now or at a later cutoff.
			w.tasklessSwept = c.last
		}
	}
	return nil
}

// purgeEvents removes the events with the given seqs from their chunks:
// each chunk involved is rewritten without them, or deleted when nothing is
// left of it.
func (w *writer) purgeEvents(seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	slices.Sort(seqs)
	gone := make(map[uint64]struct{}, len(seqs))
	for _, s := range seqs {
		gone[s] = struct{}{}
	}
	find, _, err := w.c.Prepare("SELECT first_seq, last_seq, data FROM events WHERE first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
	if err != nil {
		return err
	}
	defer find.Close() //nolint:errcheck
	ed, err := w.chunkEditor()
	if err != nil {
		return err
	}
	defer ed.close()
	var kept []engine.Event
	for i := 0; i < len(seqs); {
		_ = find.BindInt64(1, int64(seqs[i]))
		if !find.Step() {
			if err := find.Reset(); err != nil {
				return err
			}
			i++ // no chunk holds it (already purged)
			continue
		}
		first, last := find.ColumnInt64(0), uint64(find.ColumnInt64(1))
		if seqs[i] > last { // in no chunk (already purged)
			if err := find.Reset(); err != nil {
				return err
			}
			i++
			continue
		}
		removed := 0
		kept, err = decodeEvents(kept[:0], find.ColumnRawBlob(2), func(seq uint64) bool {
			_, g := gone[seq]
			if g {
				removed++
			}
			return !g
		})
		if rerr := find.Reset(); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("event chunk %d: %w", first, err)
		}
		for i < len(seqs) && seqs[i] <= last {
			i++
		}
		if removed > 0 {
			if err := ed.replace(uint64(first), kept); err != nil {
				return err
			}
		}
	}
	return nil
}

// chunkEditor rewrites event chunks during a purge.
type chunkEditor struct {
	w        *writer
	upd, del *sqlite3.Stmt
}

func (w *writer) chunkEditor() (*chunkEditor, error) {
	upd, _, err := w.c.Prepare("UPDATE events SET data = ? WHERE first_seq = ?")
	if err != nil {
		return nil, err
	}
	del, _, err := w.c.Prepare("DELETE FROM events WHERE first_seq = ?")
	if err != nil {
		_ = upd.Close()
		return nil, err
	}
	return &chunkEditor{w: w, upd: upd, del: del}, nil
}

func (ed *chunkEditor) close() {
	_ = ed.upd.Close()
	_ = ed.del.Close()
}

// replace makes kept the events of the chunk whose first seq is first, and
// deletes the chunk when nothing is kept.
func (ed *chunkEditor) replace(first uint64, kept []engine.Event) error {
	if len(kept) == 0 {
		_ = ed.del.BindInt64(1, int64(first))
		return ed.del.Exec()
	}
	ed.w.chunk = encodeEvents(ed.w.chunk[:0], kept)
	_ = ed.upd.BindBlob(1, ed.w.chunk)
	_ = ed.upd.BindInt64(2, int64(first))
	return ed.upd.Exec()
}
