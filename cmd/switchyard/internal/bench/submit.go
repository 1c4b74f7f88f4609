// The submit and batch modes: workers post mutations as fast as the server
// answers them.

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/graph/client"
)

func taskInput(agent string, i int) map[string]any {
	return map[string]any{
		"agentId": agent,
		"action":  map[string]any{"kind": "click", "selector": "css:#go", "params": map[string]any{"n": i}},
		"labels":  []map[string]any{{"key": "bench", "value": "1"}},
	}
}

// requestBody builds worker w's request.
func requestBody(w int, batch bool, size int) ([]byte, error) {
	agent := fmt.Sprintf("bench-%d", w%32)
	if !batch {
		return json.Marshal(map[string]any{"query": Submit_Operation, "variables": map[string]any{"in": taskInput(agent, w)}})
	}
	items := make([]map[string]any, size)
	for i := range items {
		items[i] = map[string]any{"task": taskInput(agent, i)}
	}
	return json.Marshal(map[string]any{"query": SubmitBatch_Operation, "variables": map[string]any{"in": map[string]any{"items": items}}})
}

// runSubmit runs the submit and batch modes, and e2e: batches as in batch,
// but what counts is the tasks that succeeded in the window, read from the
// server's stats before and after it, not the tasks accepted.
func runSubmit(ctx context.Context, endpoint string, o Options, batch, e2e bool) (*Result, error) {
	n := o.Concurrency
	if n <= 0 {
		n = 64
		if batch {
			n = 8
		}
	}
	size := 1
	if batch {
		size = o.Batch
	}
	hc := httpClient(n, o.Token)
	gql := client.New(endpoint)
	gql.HTTP = hc
	var (
		measuring atomic.Bool
		requests  atomic.Uint64
		tasks     atomic.Uint64
		errs      atomic.Uint64
		firstErr  atomic.Pointer[string]
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	fail := func(msg string) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, &msg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < n; w++ {
		body, err := requestBody(w, batch, size)
		if err != nil {
			return nil, err
		}
		p, err := newPoster(hc, endpoint, o.Token, body)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.close()
			mine := make([]time.Duration, 0, 1<<14)
			var out struct{ Data SubmitBatchResponse }
			for ctx.Err() == nil {
				start := time.Now()
				status, data, err := p.post(ctx)
				took := time.Since(start)
				if err != nil && ctx.Err() != nil {
					break
				}
				if !measuring.Load() {
					continue
				}
				switch {
				case err != nil:
					fail(err.Error())
					continue
				case status != http.StatusOK || bytes.Contains(data, []byte(`"errors"`)):
					fail(fmt.Sprintf("HTTP %d: %s", status, firstLine(string(data))))
					continue
				}
				ok := uint64(1)
				if batch {
					if err := json.Unmarshal(data, &out); err != nil {
						fail(err.Error())
						continue
					}
					ok = uint64(out.Data.SubmitTasks.Accepted)
					if out.Data.SubmitTasks.Refused > 0 {
						fail(fmt.Sprintf("%d items refused", out.Data.SubmitTasks.Refused))
					}
				}
				requests.Add(1)
				tasks.Add(ok)
				mine = append(mine, took)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	sleep(ctx, o.Warmup)
	var before uint64
	if e2e {
		var err error
		if before, err = succeeded(ctx, gql); err != nil {
			return nil, err
		}
	}
	measuring.Store(true)
	start := time.Now()
	sleep(ctx, o.Duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	var after uint64
	if e2e {
		var err error
		if after, err = succeeded(ctx, gql); err != nil {
			return nil, err
		}
	}
	cancel()
	wg.Wait()
	r := &Result{Seconds: elapsed.Seconds(), Concurrency: n, Requests: requests.Load(), Tasks: tasks.Load(), Errors: errs.Load(),
		Latency: summarize(lat)}
	if batch {
		r.Batch = size
	}
	if p := firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	if e2e {
		r.Accepted, r.Tasks = r.Tasks, after-before
	}
	r.RequestsPerSec = float64(r.Requests) / r.Seconds
	r.TasksPerSec = float64(r.Tasks) / r.Seconds
	return r, nil
}

// succeeded reads how many tasks the server has seen succeed since it
// started.
func succeeded(ctx context.Context, gql *client.Client) (uint64, error) {
	res, err := EndedCounts(ctx, gql)
	if err != nil {
		return 0, fmt.Errorf("e2e: read the server's stats: %w", err)
	}
	for _, c := range res.Stats.Ended {
		if c.State == TaskStateSucceeded {
			return uint64(c.Count), nil
		}
	}
	return 0, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
