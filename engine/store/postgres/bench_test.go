package postgres_test

// Benchmarks of the store on the engine's workload, against the SQLite store
// in the same run. PostgreSQL does most of its work in its own processes, so
// besides the wall-clock rates each benchmark reports the CPU time per task
// of this process (cpu-µs/task) and of the local PostgreSQL server
// (pg-cpu-µs/task, from /proc; 0 when the server is not local).
//
//	go test ./engine/store/postgres -run '^$' -bench . -benchtime 2s
//
// The benchmarks themselves are engine/store/storebench's, which the SQLite
// store runs too, so that the figures compare.

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/engine/store/storebench"
)

// serverCPU sums the CPU time of the local processes named postgres.
func serverCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		sy, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + sy
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}

func kinds() []storebench.Kind {
	return []storebench.Kind{
		{Name: "memory", Open: func(*testing.B) engine.Store { return memory.New(memory.Options{}) }},
		{Name: "sqlite-full", Open: func(b *testing.B) engine.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), "bench.db")})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{Name: "postgres", Open: func(b *testing.B) engine.Store { return openBenchStore(b) }},
		{Name: "postgres-batch", Open: func(b *testing.B) engine.Store { s := openBenchStore(b); s.SetCopyMin(math.MaxInt); return s }},
		{Name: "postgres-copy", Open: func(b *testing.B) engine.Store { s := openBenchStore(b); s.SetCopyMin(0); return s }},
	}
}

func openBenchStore(b *testing.B) *postgres.Store {
	schema := newSchema(b)
	s, err := postgres.Open(context.Background(), postgres.Options{URL: databaseURL(b), Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// serverMeter reports the local PostgreSQL server's CPU time per task.
var serverMeter = storebench.Meter{Name: "pg-cpu-µs/task", Read: serverCPU}

// BenchmarkCommit measures group commits of the engine's workload.
func BenchmarkCommit(b *testing.B) {
	databaseURL(b)
	storebench.Commit(b, kinds(), serverMeter)
}

// BenchmarkEngineSubmitBatch measures the engine submitting batches onto the
// store.
func BenchmarkEngineSubmitBatch(b *testing.B) {
	databaseURL(b)
	storebench.EngineSubmitBatch(b, kinds(), serverMeter)
}
