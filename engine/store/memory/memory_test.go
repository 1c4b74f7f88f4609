package memory_test

import (
	"testing"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/engine/store/storetest"
)

// TestConformance runs the store conformance suite. A memory store survives
// a "restart" only within the process: Reopen hands back the same store.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Driver{
		New:    func(*testing.T) engine.Store { return memory.New(memory.Options{}) },
		Reopen: func(_ *testing.T, s engine.Store) engine.Store { return s },
	})
}
