package mcp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// heldStore is a durable memory store whose commits can be held at a gate,
// and let through one at a time or all at once.
type heldStore struct {
	*memory.Store
	passes chan struct{}

	mu      sync.Mutex
	holding bool
	arrived int
	let     int
}

func (s *heldStore) Durable() bool { return true }

func (s *heldStore) Commit(ctx context.Context, b *engine.Batch) error {
	s.mu.Lock()
	held := s.holding
	if held {
		s.arrived++
	}
	s.mu.Unlock()
	if held {
		<-s.passes
	}
	return s.Store.Commit(ctx, b)
}

func (s *heldStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = true
}

func (s *heldStore) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrived - s.let
}

func (s *heldStore) letOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.let++
	s.passes <- struct{}{}
}

func (s *heldStore) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = false
	for ; s.let < s.arrived; s.let++ {
		s.passes <- struct{}{}
	}
}

// watchedEngine checks every task it hands the MCP server against the
// store at that moment, and tells the test when a committed read begins.
type watchedEngine struct {
	*engine.Engine
	store   *heldStore
	reading chan struct{}

	mu          sync.Mutex
	uncommitted []string
}

func (w *watchedEngine) Task(ctx context.Context, id string) (*engine.Task, error) {
	t, err := w.Engine.Task(ctx, id)
	w.check(t)
	return t, err
}

func (w *watchedEngine) CommittedTask(ctx context.Context, id string) (*engine.Task, error) {
	select {
	case w.reading <- struct{}{}:
	default:
	}
	t, err := w.Engine.CommittedTask(ctx, id)
	w.check(t)
	return t, err
}

func (w *watchedEngine) check(t *engine.Task) {
	if t == nil {
		return
	}
	st, err := w.store.Store.Task(context.Background(), t.ID)
	if err == nil && st.LastSeq >= t.LastSeq {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.uncommitted = append(w.uncommitted, fmt.Sprintf("%s handed out while the store has no such task (%v)", t.State, err))
		return
	}
	w.uncommitted = append(w.uncommitted, fmt.Sprintf("%s (seq %d) handed out while the store has %s (seq %d)", t.State, t.LastSeq, st.State, st.LastSeq))
}

func (w *watchedEngine) handedOutUncommitted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.uncommitted...)
}

// A call waiting for its task wakes for the commit of the attempt's start
// while the task's end is already recorded and its commit held at the
// store: it must not answer with that end (a crash would roll it back) but
// once its commit has landed.
func TestAWaitingCallAnswersOnlyWithACommittedEnd(t *testing.T) {
	t.Parallel()
	st := &heldStore{Store: memory.New(memory.Options{}), passes: make(chan struct{}, 64)}
	exec := enginetest.NewExecutor()
	w := &watchedEngine{store: st, reading: make(chan struct{}, 16)}
	d := setupDirectOver(t, engine.Config{}, 0, st, exec, func(e *engine.Engine) mcp.Engine {
		w.Engine = e
		return w
	})
	t.Cleanup(st.open) // before the engine's last commit
	ctx := ctxFor(t)
	c := d.connect(t, "waiter")
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "text", Arguments: map[string]any{}})
		if err != nil {
			res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	var id string
	waitfor.Eventually(t, "the call's attempt starts (its assignment committed)", func() bool {
		if ids := exec.Running(); len(ids) == 1 {
			id = ids[0]
		}
		return id != ""
	})

	st.hold()
	exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.waiting() == 1 })
	require.NoError(t, exec.Succeed(id, `{"success":true,"result":{"ok":true}}`))
	for len(w.reading) > 0 {
		<-w.reading
	}
	st.letOne() // the start lands and wakes the call; the end stays held
	var res *sdk.CallToolResult
	for res == nil {
		select {
		case <-w.reading: // the call's read waits for the end's commit: let it land
			st.open()
		case res = <-done:
		case <-ctx.Done():
			t.Fatal("the call did not answer")
		}
	}
	require.Empty(t, w.handedOutUncommitted(), "the call is handed only committed states")
	require.False(t, res.IsError, textOf(res))
	stored, err := st.Store.Task(ctx, id)
	require.NoError(t, err)
	require.Equal(t, engine.StateSucceeded, stored.State, "it answered once the end was committed")
}
