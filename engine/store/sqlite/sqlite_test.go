package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/engine/store/storetest"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	return openWith(t, sqlite.Options{Path: path, Readers: 2, CacheMiB: 8})
}

func openWith(t *testing.T, opts sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), opts)
	require.NoError(t, err)
	return s
}

// TestConformance runs the store conformance suite on a fresh file per test;
// Reopen closes the store and opens the same file again.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Driver{
		New: func(t *testing.T) engine.Store { return open(t, filepath.Join(t.TempDir(), "switchyard.db")) },
		Reopen: func(t *testing.T, s engine.Store) engine.Store {
			path := s.(*sqlite.Store).Path()
			require.NoError(t, s.Close())
			return open(t, path)
		},
	})
}

// TestConformancePreallocatedLog runs the suite over a log written out at
// open and restarted every 64 pages, so that commits, checkpoints and
// reopens meet the zeros past the log's end many times.
func TestConformancePreallocatedLog(t *testing.T) {
	t.Parallel()
	opts := func(path string) sqlite.Options {
		return sqlite.Options{Path: path, Readers: 2, CacheMiB: 8, CheckpointPages: 64, PreallocateWAL: true}
	}
	storetest.Run(t, storetest.Driver{
		New: func(t *testing.T) engine.Store { return openWith(t, opts(filepath.Join(t.TempDir(), "switchyard.db"))) },
		Reopen: func(t *testing.T, s engine.Store) engine.Store {
			path := s.(*sqlite.Store).Path()
			require.NoError(t, s.Close())
			return openWith(t, opts(path))
		},
	})
}
