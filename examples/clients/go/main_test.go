package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/graph/server"
)

// serve starts a real Switchyard server (engine, memory store, GraphQL over
// HTTP and WebSocket) over the given executor and registry, on a loopback
// port, and returns its base URL.
func serve(t *testing.T, exec engine.Executor, reg *executor.Registry, arts artifact.Store) (string, *engine.Engine) {
	t.Helper()
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	if reg != nil {
		reg.SetSink(eng)
	}
	srv, err := server.New(server.Options{Engine: eng, Registry: reg, Artifacts: arts, Version: "test", Logger: hclog.NewNullLogger()})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = eng.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), eng
}

func TestAgentSubmitsItsDAGAndFollowsItToTheEnd(t *testing.T) {
	t.Parallel()
	// The executor answers each action at once with its kind, so the test
	// sees the order in which the engine released the DAG.
	exec := enginetest.NewExecutor()
	exec.Auto = func(run *engine.Run) engine.Outcome {
		b, _ := json.Marshal(map[string]string{"did": run.Spec().Action.Kind})
		return engine.Outcome{Result: b}
	}
	base, _ := serve(t, exec, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	sum, err := run(ctx, Options{Server: base, URL: "http://example.test/", Agent: "go-example"}, &out)
	require.NoError(t, err, out.String())
	require.True(t, sum.AllSucceeded(), "%+v\n%s", sum, out.String())
	require.Len(t, sum.Tasks, 4)
	require.JSONEq(t, `{"did":"navigate"}`, string(sum.Tasks["open"].Result))
	require.JSONEq(t, `{"did":"screenshot"}`, string(sum.Tasks["shot"].Result))

	// Dependencies held: open ran first, shot last.
	started := exec.Started()
	require.Len(t, started, 4)
	require.Equal(t, sum.Tasks["open"].ID, started[0])
	require.Equal(t, sum.Tasks["shot"].ID, started[3])
	require.Contains(t, out.String(), "following it live")
	require.Contains(t, out.String(), "→ SUCCEEDED")
}

func TestAgentRunsItsDAGInARealBrowser(t *testing.T) {
	t.Parallel()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("chromium is not installed: skipping the real-browser run of the Go agent (apt-get install chromium)")
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>Switchyard example page</title><h1>Hello from the example</h1>`))
	}))
	t.Cleanup(page.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	browser, err := chromium.Start(ctx, chromium.Options{ExecPath: path})
	require.NoError(t, err)
	t.Cleanup(func() { _ = browser.Close() })
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: 200 * time.Millisecond, HealthTimeout: 5 * time.Second})
	t.Cleanup(reg.Close)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "local", URL: browser.URL(), Token: browser.Token(), Capacity: 4})
	require.NoError(t, err)
	arts := artifact.NewMemory()
	exec, err := executor.New(executor.Options{Registry: reg, Artifacts: arts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	base, _ := serve(t, exec, reg, arts)

	var out bytes.Buffer
	sum, err := run(ctx, Options{Server: base, URL: page.URL, Agent: "go-example"}, &out)
	require.NoError(t, err, out.String())
	require.True(t, sum.AllSucceeded(), "%+v\n%s", sum, out.String())
	require.Contains(t, string(sum.Tasks["title"].Result), "Switchyard example page")
	require.Contains(t, string(sum.Tasks["text"].Result), "Hello from the example")
	require.Contains(t, string(sum.Tasks["shot"].Result), "artifact", "a screenshot comes back as an artifact reference")
	ids := []string{sum.Tasks["open"].ID, sum.Tasks["title"].ID, sum.Tasks["text"].ID, sum.Tasks["shot"].ID}
	require.False(t, slices.Contains(ids, ""))
}
