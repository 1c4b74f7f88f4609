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
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Readers: 2, CacheMiB: 8})
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
