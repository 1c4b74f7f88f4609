// Package storetest is the conformance suite every engine.Store driver
// passes: the same tests, run against memory, SQLite and PostgreSQL,
// so that drivers cannot drift. A driver's own test calls Run:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Driver{
//			New:    func(t *testing.T) engine.Store { ... a fresh, empty store ... },
//			Reopen: func(t *testing.T, s engine.Store) engine.Store { ... the same data, opened again ... },
//		})
//	}
//
// The suite has two parts: the Store contract method by method (atomic
// commits, upserts, keyset pages under every filter, counts, idempotency,
// batches, lanes and settings, events, Load, purges, large and unicode
// values, concurrent reads), and the engine on top of the store (an engine
// dropped without shutdown, and a new one started on the same data,
// recovers as doc/architecture.md promises).
package storetest

import (
	"testing"

	"github.com/switchyard/switchyard/engine"
)

// Driver is what the suite needs from a store implementation.
type Driver struct {
	// New returns a new, empty store. The suite closes it (Close may be
	// called more than once).
	New func(t *testing.T) engine.Store
	// Reopen returns a store over the same data as s, as a restarted
	// process would find it: a database driver closes s and opens the same
	// database again; an in-process driver may return s itself. s is not
	// used afterwards.
	Reopen func(t *testing.T, s engine.Store) engine.Store
}

// Run runs the whole suite against a driver.
func Run(t *testing.T, d Driver) {
	t.Helper()
	if d.New == nil || d.Reopen == nil {
		t.Fatal("storetest: Driver.New and Driver.Reopen are required")
	}
	t.Run("Store", func(t *testing.T) { runStore(t, d) })
	t.Run("Engine", func(t *testing.T) { runEngine(t, d) })
}

// open returns a fresh store that is closed when the test ends.
func (d Driver) open(t *testing.T) engine.Store {
	t.Helper()
	s := d.New(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen restarts a store; the new one is closed when the test ends.
func (d Driver) reopen(t *testing.T, s engine.Store) engine.Store {
	t.Helper()
	s2 := d.Reopen(t, s)
	t.Cleanup(func() { _ = s2.Close() })
	return s2
}
