package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/internal/poison"
)

// Batches submitted concurrently over GraphQL to a follower's server are
// read typed into pooled room, which under tests is poisoned once each
// response is written (internal/poison); the follower forwards each batch
// to the leader as a command. Every response, every task the leader
// admitted and the follower's log hold what the batch sent: a follower
// that encoded its command from the resolver's items (or their actions)
// after SubmitBatch returned, or from the input after the response, would
// forward the poison.
func TestBatchesThroughAFollowersServerCarryNoPoison(t *testing.T) {
	require.True(t, poison.On(), "released room is poisoned in tests")
	f := newFleet(t, 2, time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)

	var logs syncBuffer
	srv, err := server.New(server.Options{Engine: follower.API(), Version: "test",
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	c := client.New("http://" + ln.Addr().String() + "/graphql")
	c.HTTP = &http.Client{Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const (
		full = `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId accepted refused
			items { index key task { id agentId instruction labels { key value } action { kind selector params } } } } }`
		bare = `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId accepted refused items { index key } } }`
	)
	type item struct{ key, agent, text, label string }
	batch := func(w, r, n int) ([]item, map[string]any) {
		var sent []item
		var items []map[string]any
		for i := range n {
			s := item{key: fmt.Sprintf("w%d-r%d-i%d", w, r, i), agent: fmt.Sprintf("agent-w%d-r%d", w, r),
				text: fmt.Sprintf("css:#w%d-r%d-i%d", w, r, i), label: fmt.Sprintf("l-w%d-r%d-i%d", w, r, i)}
			sent = append(sent, s)
			task := map[string]any{"agentId": s.agent, "idempotencyKey": s.key,
				"labels": []map[string]any{{"key": "item", "value": s.label}}}
			if i%2 == 0 {
				task["instruction"] = s.text
			} else {
				task["action"] = map[string]any{"kind": "click", "selector": s.text, "params": map[string]any{"n": i}}
			}
			items = append(items, map[string]any{"key": s.key, "task": task})
		}
		return sent, map[string]any{"in": map[string]any{"items": items}}
	}
	// One request of each query first: then both are cached, and the
	// follower's body decoder reads the batches typed.
	for _, q := range []string{full, bare} {
		_, vars := batch(9, 9, 1)
		_, _, err := c.Raw(ctx, client.Request{Query: q, Variables: vars})
		require.NoError(t, err)
	}

	var mu sync.Mutex
	sentBy := map[string][]item{} // by batch id
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for r := range 4 {
				sent, vars := batch(w, r, 6+2*r)
				q := bare
				if (w+r)%2 == 0 {
					q = full
				}
				res, _, err := c.Raw(ctx, client.Request{Query: q, Variables: vars})
				if err != nil || len(res.Errors) > 0 {
					t.Errorf("w%d r%d: %v %v", w, r, err, res)
					return
				}
				if strings.Contains(string(res.Data), poison.Text) {
					t.Errorf("w%d r%d: the response holds the poison: %s", w, r, res.Data)
					return
				}
				var out struct {
					SubmitTasks struct {
						BatchID  string
						Accepted int
						Items    []struct {
							Key  string
							Task *struct {
								AgentID     string
								Instruction *string
								Action      *struct{ Selector string }
							}
						}
					}
				}
				if err := json.Unmarshal(res.Data, &out); err != nil || out.SubmitTasks.Accepted != len(sent) {
					t.Errorf("w%d r%d: %v %s", w, r, err, res.Data)
					return
				}
				for i, it := range out.SubmitTasks.Items {
					if it.Key != sent[i].key {
						t.Errorf("w%d r%d item %d: key %q, sent %q", w, r, i, it.Key, sent[i].key)
					}
					if task := it.Task; task != nil && (task.AgentID != sent[i].agent ||
						task.Instruction != nil && *task.Instruction != sent[i].text || task.Action != nil && task.Action.Selector != sent[i].text) {
						t.Errorf("w%d r%d item %d: %s, sent %+v", w, r, i, res.Data, sent[i])
					}
				}
				mu.Lock()
				sentBy[out.SubmitTasks.BatchID] = sent
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, sentBy, 12)

	// What the leader admitted.
	for batchID, sent := range sentBy {
		tasks, err := lead.API().Tasks(ctx, engine.TaskQuery{Filter: engine.TaskFilter{BatchID: batchID}, Limit: 1000})
		require.NoError(t, err)
		require.Len(t, tasks, len(sent), "batch %s on the leader", batchID)
		byKey := map[string]*engine.Task{}
		for _, task := range tasks {
			byKey[task.Spec.IdempotencyKey] = task
		}
		for i, s := range sent {
			task := byKey[s.key]
			require.NotNil(t, task, "item %s on the leader", s.key)
			require.Equal(t, s.agent, task.Spec.AgentID, "item %s", s.key)
			require.Equal(t, map[string]string{"item": s.label}, task.Spec.Labels, "item %s", s.key)
			if i%2 == 0 {
				require.Equal(t, s.text, task.Spec.Instruction, "item %s", s.key)
			} else {
				require.NotNil(t, task.Spec.Action, "item %s", s.key)
				require.Equal(t, "click", task.Spec.Action.Kind, "item %s", s.key)
				require.Equal(t, s.text, task.Spec.Action.Selector, "item %s", s.key)
				require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(task.Spec.Action.Params), "item %s", s.key)
			}
		}
	}
	for line := range strings.Lines(logs.String()) {
		require.NotContains(t, line, poison.Text, "a line of the follower's log")
	}
}

// syncBuffer is a log destination that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
