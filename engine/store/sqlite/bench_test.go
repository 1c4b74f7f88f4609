package sqlite_test

// Benchmarks of the store on the engine's workload, against the memory store
// in the same run. On a shared machine the wall clock is noisy: cpu-µs/task
// (the process's CPU time per task) is the steadier figure.
//
//	go test ./engine/store/sqlite -run '^$' -bench . -benchtime 2s

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/engine/store/storebench"
)

var kinds = []storebench.Kind{
	{Name: "memory", Open: func(*testing.B) engine.Store { return memory.New(memory.Options{}) }},
	{Name: "sqlite-full", Open: func(b *testing.B) engine.Store { return openBench(b, sqlite.SyncFull) }},
	{Name: "sqlite-normal", Open: func(b *testing.B) engine.Store { return openBench(b, sqlite.SyncNormal) }},
}

func openBench(b *testing.B, sync sqlite.Sync) engine.Store {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), "bench.db"), Sync: sync, PreallocateWAL: true})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCommit measures group commits of the engine's workload.
func BenchmarkCommit(b *testing.B) { storebench.Commit(b, kinds) }

// BenchmarkEngineSubmitBatch measures the engine submitting batches onto the
// store.
func BenchmarkEngineSubmitBatch(b *testing.B) { storebench.EngineSubmitBatch(b, kinds) }

// BenchmarkEngineSubmitOne measures the engine under 64 callers submitting
// one task at a time onto the store.
func BenchmarkEngineSubmitOne(b *testing.B) { storebench.EngineSubmitOne(b, kinds) }
