// Command agent is a minimal Switchyard agent in Go: it submits a small DAG
// of browser tasks as one batch (submitTasks, items naming each other by key
// in dependsOn) and follows it live over the taskEventFeed subscription
// until every task has ended, then prints each task's result.
//
//	go run ./examples/clients/go --server http://127.0.0.1:8080 --url https://example.com
//
// The DAG, all in one browser session (one tab, one task at a time):
//
//	open (navigate) ─┬─▶ title (evaluate document.title) ─┐
//	                 └─▶ text  (text of the page)  ────────┴─▶ shot (screenshot)
//
// Its operations are in operations.graphql; genqlient (go generate) turns
// them into the typed functions and types of genqlient.go, checked against
// the server's schema. They go through the project's small GraphQL client
// (graph/client): queries and mutations over HTTP, the subscription over
// WebSocket (graphql-transport-ws). Any GraphQL client works the same way.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/switchyard/switchyard/graph/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	server := flag.String("server", envOr("SWITCHYARD_SERVER", "http://127.0.0.1:8080"), "the Switchyard server ($SWITCHYARD_SERVER)")
	url := flag.String("url", "https://example.com", "the page the DAG visits")
	agent := flag.String("agent", "example-go-agent", "the agent id to submit as")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	sum, err := run(ctx, Options{Server: *server, URL: *url, Agent: *agent, Token: os.Getenv("SWITCHYARD_TOKEN")}, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	if !sum.AllSucceeded() {
		os.Exit(2)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Options say where to submit and what.
type Options struct {
	Server string // base URL of the server, e.g. http://127.0.0.1:8080
	URL    string // the page to visit
	Agent  string // the agent id
	Token  string // a bearer token, when the server requires one
}

// Summary is how the batch ended: each task by its key.
type Summary struct {
	BatchID string
	Tasks   map[string]TaskOutcome
}

// TaskOutcome is one task's end.
type TaskOutcome struct {
	ID     string
	State  string
	Result json.RawMessage
	Error  string
}

// AllSucceeded reports whether every task succeeded.
func (s Summary) AllSucceeded() bool {
	for _, t := range s.Tasks {
		if t.State != "SUCCEEDED" {
			return false
		}
	}
	return len(s.Tasks) > 0
}

// dag returns the batch's items: keys, the browser actions, and dependsOn
// naming other items' keys.
func dag(o Options, session string) []BatchItemInput {
	item := func(key, kind, params string, deps ...string) BatchItemInput {
		action := &ActionInput{Kind: kind}
		if params != "" {
			raw := json.RawMessage(params)
			action.Params = &raw
		}
		return BatchItemInput{Key: &key, Task: SubmitTaskInput{
			AgentId: o.Agent, SessionKey: &session, Action: action, DependsOn: deps,
			Labels: []LabelInput{{Key: "example", Value: "go-agent"}},
		}}
	}
	url, _ := json.Marshal(map[string]string{"url": o.URL})
	return []BatchItemInput{
		item("open", "navigate", string(url)),
		item("title", "evaluate", `{"expression": "document.title"}`, "open"),
		item("text", "text", "", "open"),
		item("shot", "screenshot", "", "title", "text"),
	}
}

var terminal = map[string]bool{"SUCCEEDED": true, "FAILED": true, "CANCELLED": true, "REJECTED": true, "EXPIRED": true}

// run submits the DAG and follows it to the end, printing what happens to w.
func run(ctx context.Context, o Options, w io.Writer) (Summary, error) {
	c := client.New(strings.TrimSuffix(o.Server, "/") + "/graphql")
	c.HTTP = &http.Client{Timeout: 30 * time.Second}
	if o.Token != "" {
		c.Header.Set("Authorization", "Bearer "+o.Token) // HTTP and connection_init
	}

	// 1. Where the event stream stands now: following from here after the
	// submit cannot miss the batch's first events.
	now, err := LastSeq(ctx, c)
	if err != nil {
		return Summary{}, fmt.Errorf("read stats: %w", err)
	}

	// 2. Submit the DAG as one batch.
	session := fmt.Sprintf("%s-%d", o.Agent, time.Now().UnixNano())
	sub, err := SubmitDAG(ctx, c, SubmitTasksInput{Items: dag(o, session)})
	if err != nil {
		return Summary{}, fmt.Errorf("submit: %w", err)
	}
	keyOf := map[string]string{}
	for _, it := range sub.SubmitTasks.Items {
		key := deref(it.Key)
		if it.Error != nil {
			return Summary{}, fmt.Errorf("item %s refused: %s: %s", key, it.Error.Code, it.Error.Message)
		}
		keyOf[it.Task.Id] = key
		fmt.Fprintf(w, "submitted %-5s %s\n", key, it.Task.Id)
	}
	batchID := deref(sub.SubmitTasks.BatchId)
	fmt.Fprintf(w, "batch %s: following it live\n", batchID)

	// 3. Follow the batch's events until every task has ended. A dropped
	// connection resumes after the last seq seen.
	ended := map[string]string{}
	after := now.Stats.LastSeq
	for len(ended) < len(keyOf) {
		err := follow(ctx, c, batchID, &after, func(e event) {
			if e.Kind != "STATE" {
				return
			}
			fmt.Fprintf(w, "%6d %-5s %s → %s %s\n", e.Seq, keyOf[e.TaskID], orDot(e.From), e.To, e.Reason)
			if terminal[e.To] {
				ended[e.TaskID] = e.To
			}
		}, func() bool { return len(ended) == len(keyOf) })
		if err != nil {
			if ctx.Err() != nil {
				return Summary{}, fmt.Errorf("follow: %w", ctx.Err())
			}
			fmt.Fprintf(w, "connection lost (%v): resuming after seq %d\n", err, after)
			time.Sleep(500 * time.Millisecond)
		}
	}

	// 4. Read the results.
	b, err := BatchResults(ctx, c, batchID)
	if err != nil {
		return Summary{}, fmt.Errorf("read results: %w", err)
	}
	if b.Batch == nil {
		return Summary{}, fmt.Errorf("read results: batch %s not found", batchID)
	}
	sum := Summary{BatchID: batchID, Tasks: map[string]TaskOutcome{}}
	for _, t := range b.Batch.Tasks.Nodes {
		out := TaskOutcome{ID: t.Id, State: string(t.State), Result: t.Result, Error: deref(t.Error)}
		sum.Tasks[keyOf[t.Id]] = out
		fmt.Fprintf(w, "%-5s %-9s %s%s\n", keyOf[t.Id], t.State, clip(string(t.Result), 100), out.Error)
	}
	return sum, nil
}

// event is an element of taskEventFeed.events.
type event struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	TaskID string `json:"taskId"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// follow subscribes to the batch's events after *after and hands each to
// fn, until done says so or the connection ends.
func follow(ctx context.Context, c *client.Client, batchID string, after *int64, fn func(event), done func() bool) error {
	conn, err := c.Dial(ctx, client.DialOptions{})
	if err != nil {
		return err
	}
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, FollowBatch_Operation, map[string]any{"b": batchID, "after": *after})
	if err != nil {
		return err
	}
	for !done() {
		msg, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if len(msg.Errors) > 0 {
			return msg.Errors
		}
		var data FollowBatchResponse
		if err := json.Unmarshal(msg.Data, &data); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		var events []event
		if err := json.Unmarshal(data.TaskEventFeed.Events, &events); err != nil {
			return fmt.Errorf("decode events: %w", err)
		}
		for _, e := range events {
			if e.Kind == "LAGGED" {
				return errors.New("fell behind the server (LAGGED)")
			}
			fn(e)
		}
		*after = data.TaskEventFeed.LastSeq
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orDot(s string) string {
	if s == "" {
		return "·"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
