package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/engine/store/storetest"
)

// TestConformance runs the store conformance suite on a fresh schema per
// test; Reopen closes the store and opens the same schema again.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Driver{
		New: func(t *testing.T) engine.Store { return openStore(t, newSchema(t)) },
		Reopen: func(t *testing.T, s engine.Store) engine.Store {
			schema := s.(*postgres.Store).Schema()
			require.NoError(t, s.Close())
			return openStore(t, schema)
		},
	})
}

// TestConformanceWithCopy runs the suite with every commit writing its new
// rows with COPY (by default only large commits do).
func TestConformanceWithCopy(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, schema string) engine.Store {
		s := openStore(t, schema)
		s.SetCopyMin(0)
		return s
	}
	storetest.Run(t, storetest.Driver{
		New: func(t *testing.T) engine.Store { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, s engine.Store) engine.Store {
			schema := s.(*postgres.Store).Schema()
			require.NoError(t, s.Close())
			return open(t, schema)
		},
	})
}
