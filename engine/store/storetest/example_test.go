package storetest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/engine/store/storetest"
)

// How a store driver's tests run the suite: New opens an empty store, Reopen
// opens the same data again as a restarted process would. Here the SQLite
// driver, over a file in the test's temporary directory (its own tests in
// engine/store/sqlite do exactly this).
func Example() {
	testConformance := func(t *testing.T) {
		open := func(t *testing.T, path string) engine.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		storetest.Run(t, storetest.Driver{
			New: func(t *testing.T) engine.Store { return open(t, filepath.Join(t.TempDir(), "switchyard.db")) },
			Reopen: func(t *testing.T, s engine.Store) engine.Store {
				path := s.(*sqlite.Store).Path()
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				return open(t, path)
			},
		})
	}
	_ = testConformance // func TestConformance(t *testing.T) { … } in the driver's package
}
