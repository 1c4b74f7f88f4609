package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/executor"
	"github.com/switchyard/switchyard/engine/executor/pinchtab"
)

// The cost the executor adds to a forwarded action, against a direct HTTP call
// to the same instance over the same kind of connection. Each benchmark
// reports p50 and p99 latency per call; the difference between
// BenchmarkForwardExecutor and BenchmarkForwardDirectHTTP is the overhead.
//
//	go test -run '^$' -bench Forward -benchtime 20000x ./engine/executor/

const benchAnswer = `{"success":true,"result":{"clicked":true}}`

func benchInstance(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/health" {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		_, _ = io.WriteString(w, benchAnswer)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// measure runs op b.N times and reports the p50 and p99 of its latency.
func measure(b *testing.B, op func() error) {
	b.Helper()
	for i := 0; i < 200; i++ { // warm the connections
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*50/100].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds()), "p99-ns")
}

func BenchmarkForwardDirectHTTP(b *testing.B) {
	srv := benchInstance(b)
	hc := pinchtab.DefaultHTTPClient()
	body := []byte(`{"kind":"click","selector":"css:#go"}`)
	measure(b, func() error {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/tabs/T1/action", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return err
	})
}

func BenchmarkForwardClient(b *testing.B) {
	srv := benchInstance(b)
	c, err := pinchtab.New(srv.URL, "token")
	if err != nil {
		b.Fatal(err)
	}
	ctx := pinchtab.WithRequestInfo(context.Background(), pinchtab.RequestInfo{AgentID: "agent", TaskID: "task"})
	act := pinchtab.Action{Kind: "click", Selector: "css:#go"}
	measure(b, func() error {
		_, err := c.Act(ctx, "T1", act)
		return err
	})
}

func BenchmarkForwardExecutor(b *testing.B) {
	srv := benchInstance(b)
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour})
	b.Cleanup(reg.Close)
	if _, err := reg.Register(executor.InstanceConfig{ID: "a", URL: srv.URL, Token: "token"}); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.CheckNow(context.Background(), "a"); err != nil {
		b.Fatal(err)
	}
	exec, err := executor.New(executor.Options{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = exec.Close() })
	// A session task, as the engine hands it over: placed, its tab bound.
	at := &attempt{id: "task", instance: "a", tab: "T1",
		spec: &engine.TaskSpec{AgentID: "agent", SessionKey: "s", Action: &engine.Action{Kind: "click", Selector: "css:#go"}}}
	ctx := context.Background()
	measure(b, func() error {
		o := exec.Execute(ctx, at)
		if o.Err != nil {
			return o.Err
		}
		if !json.Valid(o.Result) {
			b.Fatal("bad result")
		}
		return nil
	})
}

// stubTransport answers every request in memory, so that the benchmarks
// below measure the CPU cost of the code around the HTTP call and nothing of
// the network or the server.
type stubTransport struct{}

func (stubTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body := benchAnswer
	if r.URL.Path == "/health" {
		body = `{"status":"ok"}`
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader([]byte(body))), ContentLength: int64(len(body)), Request: r}, nil
}

func BenchmarkOverheadDirectHTTP(b *testing.B) {
	hc := &http.Client{Transport: stubTransport{}}
	body := []byte(`{"kind":"click","selector":"css:#go"}`)
	measure(b, func() error {
		req, err := http.NewRequest(http.MethodPost, "http://instance.test/tabs/T1/action", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return err
	})
}

func BenchmarkOverheadExecutor(b *testing.B) {
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour, HTTPClient: &http.Client{Transport: stubTransport{}}})
	b.Cleanup(reg.Close)
	if _, err := reg.Register(executor.InstanceConfig{ID: "a", URL: "http://instance.test", Token: "token"}); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.CheckNow(context.Background(), "a"); err != nil {
		b.Fatal(err)
	}
	exec, err := executor.New(executor.Options{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = exec.Close() })
	at := &attempt{id: "task", instance: "a", tab: "T1",
		spec: &engine.TaskSpec{AgentID: "agent", SessionKey: "s", Action: &engine.Action{Kind: "click", Selector: "css:#go"}}}
	ctx := context.Background()
	measure(b, func() error { return exec.Execute(ctx, at).Err })
}
