package sqlite

// Consistency of the bookkeeping. The meta table's last_seq must be at least
// every stored event's and task's seq (the engine numbers new events after
// it), and the event chunks must not overlap (readers walk them in order).
// A file written by two processes at once (which the owner lock now
// prevents, but older files may have been) or edited by hand can break
// both. Open repairs what is certain and refuses the rest; Check and Repair
// are for `switchyard db check|repair`.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ncruces/go-sqlite3"
)

// Finding is one way a database's bookkeeping disagrees with its contents.
type Finding struct {
	// Problem says what is wrong, with the numbers.
	Problem string
	// Repair says what Repair changes about it.
	Repair string
	// Certain is set when the repair loses nothing and is the only
	// consistent choice (e.g. raising last_seq to the highest stored seq):
	// Open applies it on its own. Other repairs delete rows and need an
	// operator's `switchyard db repair`.
	Certain bool
}

// ErrInconsistent is what Open returns (wrapped, with the findings) for a
// database whose bookkeeping disagrees with its contents in a way that only
// an operator's repair can settle.
var ErrInconsistent = errors.New("the database's bookkeeping disagrees with its contents")

// Check reports where the database's bookkeeping disagrees with its
// contents, and what Repair would change. It changes nothing.
func (s *Store) Check(ctx context.Context) ([]Finding, error) {
	return s.checkOrRepair(ctx, false)
}

// Repair applies the repair of every finding of Check, in one transaction,
// and returns the findings it repaired.
func (s *Store) Repair(ctx context.Context) ([]Finding, error) {
	return s.checkOrRepair(ctx, true)
}

// Repaired returns what Open repaired on its own (certain findings), for the
// caller to log.
func (s *Store) Repaired() []Finding { return s.repaired }

func (s *Store) checkOrRepair(ctx context.Context, repair bool) (fs []Finding, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	w := s.w
	if w == nil {
		return nil, errClosed
	}
	old := w.c.SetInterrupt(ctx)
	defer w.c.SetInterrupt(old)
	if fs, err = w.checkOrRepair(repair); err != nil {
		return nil, s.describe(fmt.Errorf("check: %w", err))
	}
	return fs, nil
}

// checkOrRepair runs in one transaction: a read one to check, a write one
// to repair (committed only when every repair succeeded).
func (w *writer) checkOrRepair(repair bool) (fs []Finding, err error) {
	begin := "BEGIN"
	if repair {
		begin = "BEGIN IMMEDIATE"
	}
	if err := w.c.Exec(begin); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil || !repair {
			_ = w.c.Exec("ROLLBACK")
			return
		}
		if err = w.c.Exec("COMMIT"); err == nil {
			err = w.loadCounters()
		}
	}()

	// The event chunks, in order: each must start after the previous one ends.
	st, _, err := w.c.Prepare("SELECT first_seq, last_seq FROM events ORDER BY first_seq")
	if err != nil {
		return nil, err
	}
	var maxEvent, prevFirst, prevLast int64
	var drop []int64
	for st.Step() {
		first, last := st.ColumnInt64(0), st.ColumnInt64(1)
		switch {
		case last < first:
			fs = append(fs, Finding{Problem: fmt.Sprintf("the event chunk starting at seq %d ends before it starts (at %d)", first, last),
				Repair: fmt.Sprintf("delete the event chunk %d..%d", first, last)})
			drop = append(drop, first)
			continue
		case prevLast > 0 && first <= prevLast:
			fs = append(fs, Finding{Problem: fmt.Sprintf("events %d..%d overlap events %d..%d (two processes wrote the file at once?)", first, last, prevFirst, prevLast),
				Repair: fmt.Sprintf("delete events %d..%d, keeping %d..%d: the history of the tasks they belong to loses those events; the tasks themselves are unchanged", first, last, prevFirst, prevLast)})
			drop = append(drop, first)
			continue
		}
		prevFirst, prevLast = first, last
		maxEvent = max(maxEvent, last)
	}
	if err := errors.Join(st.Err(), st.Close()); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	maxTask, err := queryInt(w.c, "SELECT coalesce(max(seq), 0) FROM tasks")
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	rows, err := queryInt(w.c, "SELECT count(*) FROM meta WHERE key = 'last_seq'")
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	last, err := queryInt(w.c, "SELECT coalesce(max(value), 0) FROM meta WHERE key = 'last_seq'")
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	want := max(maxEvent, maxTask)
	switch {
	case rows == 0:
		fs = append(fs, Finding{Problem: "meta.last_seq is missing", Certain: true,
			Repair: fmt.Sprintf("set meta.last_seq to %d, the highest seq stored (events up to %d, tasks up to %d)", want, maxEvent, maxTask)})
	case last < want:
		fs = append(fs, Finding{Problem: fmt.Sprintf("meta.last_seq is %d but stored seqs reach %d (events up to %d, tasks up to %d): new events would collide with stored ones", last, want, maxEvent, maxTask),
			Certain: true, Repair: fmt.Sprintf("set meta.last_seq to %d", want)})
	}
	if !repair || len(fs) == 0 {
		return fs, nil
	}
	for _, first := range drop {
		if err := execInt(w.c, "DELETE FROM events WHERE first_seq = ?", first); err != nil {
			return nil, fmt.Errorf("delete events from %d: %w", first, err)
		}
	}
	if rows == 0 || last < want {
		if err := execInt(w.c, "INSERT INTO meta(key, value) VALUES ('last_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", want); err != nil {
			return nil, fmt.Errorf("set last seq: %w", err)
		}
	}
	return fs, nil
}

func execInt(c *sqlite3.Conn, q string, v int64) error {
	st, _, err := c.Prepare(q)
	if err != nil {
		return err
	}
	_ = st.BindInt64(1, v)
	return errors.Join(st.Exec(), st.Close())
}

// checkAtOpen repairs what is certain and refuses the rest.
func (s *Store) checkAtOpen(ctx context.Context) error {
	fs, err := s.Check(ctx)
	if err != nil {
		return err
	}
	var uncertain []string
	for _, f := range fs {
		if !f.Certain {
			uncertain = append(uncertain, f.Problem)
		}
	}
	if len(uncertain) > 0 {
		return fmt.Errorf("sqlite store: database %s: %w: %s; `switchyard db check --db %s` says what `switchyard db repair --db %s` would change",
			s.opts.Path, ErrInconsistent, strings.Join(uncertain, "; "), s.opts.Path, s.opts.Path)
	}
	if len(fs) > 0 {
		if s.repaired, err = s.Repair(ctx); err != nil {
			return err
		}
	}
	return nil
}
