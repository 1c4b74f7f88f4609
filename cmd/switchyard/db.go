// `switchyard db check|repair`: the SQLite file's bookkeeping, offline.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/switchyard/switchyard/engine/store/sqlite"
)

// errFindings makes `db check` exit 1 when the file needs a repair.
var errFindings = errors.New("the database needs a repair")

// exitInUse is the exit status of `db check` and `db repair` on a file that
// another process (a running server) has open: distinct from check's 1, so
// that a script can tell "busy" from "needs a repair".
const exitInUse = 4

// inUseError is sqlite.ErrInUse with the exit status exitInUse.
type inUseError struct{ error }

func (e inUseError) Unwrap() error { return e.error }

// ExitCode is the process's exit status (see run).
func (inUseError) ExitCode() int { return exitInUse }

// runDB is `switchyard db check|repair --db FILE`. Both take the file's owner
// lock, so they refuse a file that a server has open.
func runDB(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "check" && args[0] != "repair") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stderr, dbUsage)
			return nil
		}
		fmt.Fprint(stderr, dbUsage)
		return fmt.Errorf("%w: want check or repair", errUsage)
	}
	verb := args[0]
	fs := newFlags("db "+verb, "--db FILE", stderr)
	path := fs.String("db", sqlite.DefaultPath, "the SQLite file")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if _, err := os.Stat(*path); err != nil {
		return fmt.Errorf("no database at %s: %w", *path, err)
	}
	s, err := sqlite.Open(ctx, sqlite.Options{Path: *path, SkipCheck: true, Owner: "switchyard db " + verb})
	if errors.Is(err, sqlite.ErrInUse) {
		return inUseError{err}
	}
	if err != nil {
		return err
	}
	defer s.Close() //nolint:errcheck // a close error after a read-only check changes nothing
	if verb == "check" {
		found, err := s.Check(ctx)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			fmt.Fprintf(stdout, "%s: consistent\n", *path)
			return nil
		}
		for _, f := range found {
			when := "`switchyard db repair` would"
			if f.Certain {
				when = "`switchyard serve` repairs this at start, as `switchyard db repair` would:"
			}
			fmt.Fprintf(stdout, "problem: %s\n  %s %s\n", f.Problem, when, f.Repair)
		}
		return fmt.Errorf("%s: %d problem(s): %w", *path, len(found), errFindings)
	}
	repaired, err := s.Repair(ctx)
	if err != nil {
		return err
	}
	for _, f := range repaired {
		fmt.Fprintf(stdout, "repaired: %s\n  changed: %s\n", f.Problem, f.Repair)
	}
	if err := s.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: consistent (%d repair(s))\n", *path, len(repaired))
	return nil
}

const dbUsage = `Usage: switchyard db check|repair [--db FILE]

  check   say where the SQLite file's bookkeeping disagrees with its contents
          and what repair would change (exit 1 when it would change anything)
  repair  apply those changes, in one transaction

Both refuse a file that a running server owns (exit 4). --db defaults to
./switchyard.db.
`
