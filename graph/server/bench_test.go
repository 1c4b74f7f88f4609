package server_test

import (
	"bytes"
	"context"
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
)

// BenchmarkSubmitTaskHandler is one submitTask through the server's whole
// handler chain (host check, authentication, body limits, gqlgen, the
// resolver and the engine over the memory store), without sockets: the
// per-request CPU and allocations of the API layer, which do not depend on
// the machine's load as `switchyard bench` figures do.
func BenchmarkSubmitTaskHandler(b *testing.B) {
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
	srv, err := server.New(server.Options{Engine: eng, Logger: hclog.NewNullLogger(), Limits: resolvers.Limits{MaxSubscriberLag: 1 << 16}})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	body := []byte(`{"query":"mutation Submit ($in: SubmitTaskInput!) {\n\tsubmitTask(input: $in) {\n\t\tid\n\t}\n}\n",` +
		`"variables":{"in":{"action":{"kind":"click","params":{"n":7},"selector":"css:#go"},"agentId":"bench-7","labels":[{"key":"bench","value":"1"}]}}}`)
	b.ReportAllocs()
	b.SetParallelism(32) // 64 callers on 2 cores, as `switchyard bench --concurrency 64`
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
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
