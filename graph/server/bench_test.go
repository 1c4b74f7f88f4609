package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/internal/poison"
)

// BenchmarkSubmitTaskHandler is one submitTask through the server's whole
// handler chain (host check, authentication, body limits, gqlgen, the
// resolver and the engine over the memory store), without sockets: the
// per-request CPU and allocations of the API layer, which do not depend on
// the machine's load as `switchyard bench` figures do.
func BenchmarkSubmitTaskHandler(b *testing.B) {
	body := []byte(`{"query":"mutation Submit ($in: SubmitTaskInput!) {\n\tsubmitTask(input: $in) {\n\t\tid\n\t}\n}\n",` +
		`"variables":{"in":{"action":{"kind":"click","params":{"n":7},"selector":"css:#go"},"agentId":"bench-7","labels":[{"key":"bench","value":"1"}]}}}`)
	benchHandler(b, body, 32, 1) // 64 callers on 2 cores, as `switchyard bench --concurrency 64`
}

// BenchmarkSubmitTasksHandler is the same for a submitTasks of 100 items
// from 8 callers, as `switchyard bench --mode batch`; cpu-ns/item is the
// CPU per task.
func BenchmarkSubmitTasksHandler(b *testing.B) {
	var items bytes.Buffer
	for i := range 100 {
		if i > 0 {
			items.WriteByte(',')
		}
		fmt.Fprintf(&items, `{"task":{"agentId":"bench-%d","action":{"kind":"click","selector":"css:#go","params":{"n":%d}}}}`, i%8, i)
	}
	for _, sel := range []struct{ name, fields string }{
		{"counts", `accepted refused`},                                              // as `switchyard bench`
		{"items", `items { index task { id state } error { code message field } }`}, // as the CLI's submit
	} {
		b.Run(sel.name, func(b *testing.B) {
			body := []byte(`{"query":"mutation SubmitBatch ($in: SubmitTasksInput!) { submitTasks(input: $in) { ` + sel.fields + ` } }",` +
				`"variables":{"in":{"items":[` + items.String() + `]}}}`)
			benchHandler(b, body, 4, 100)
		})
	}
}

// benchHandler posts body through the handler, parallelism × GOMAXPROCS at
// a time; each request carries items tasks.
// Released memory goes back to its pools as in production (poisoning,
// on in test binaries, keeps it out of them: internal/poison).
func benchHandler(b *testing.B, body []byte, parallelism, items int) {
	b.Cleanup(poison.Set(false))
	cfg := engine.Config{
		MaxInFlight: 4096, AgentMaxInFlight: 1024, SessionMaxInFlight: 1,
		Lanes:     []engine.LaneConfig{{Name: "main", MaxInFlight: 4096, MaxQueued: 10_000_000}},
		MaxQueued: 10_000_000, MaxQueuedPerAgent: 10_000_000,
	}
	eng, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{MaxEnded: 10_000}), Executor: engine.NoopExecutor{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	srv, err := server.New(server.Options{Engine: eng, Logger: hclog.NewNullLogger(), Limits: resolvers.Limits{MaxSubscriberLag: 1 << 16, MutationsPerSecond: -1}}) // no rate limit, as the bench command's own server
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	cpu := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/graphql", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
				b.Errorf("HTTP %d: %s", w.Code, w.Body)
				return
			}
		}
	})
	b.StopTimer()
	// CPU time per request: unlike ns/op, it does not grow when other
	// processes take the cores.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	if items > 1 {
		b.ReportMetric(float64(processCPU()-cpu)/float64(b.N*items), "cpu-ns/item")
	}
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
