package mcp_test

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// watchedEngine checks every task it hands the MCP server against the
// store at that moment, and tells the test when a committed read begins.
type watchedEngine struct {
	*engine.Engine
	store   *enginetest.HeldStore
	reading chan struct{}
}

func (w *watchedEngine) Task(ctx context.Context, id string) (*engine.Task, error) {
	t, err := w.Engine.Task(ctx, id)
	w.store.Check(t)
	return t, err
}

func (w *watchedEngine) CommittedTask(ctx context.Context, id string) (*engine.Task, error) {
	select {
	case w.reading <- struct{}{}:
	default:
	}
	t, err := w.Engine.CommittedTask(ctx, id)
	w.store.Check(t)
	return t, err
}

// A call waiting for its task wakes for the commit of the attempt's start
// while the task's end is already recorded and its commit held at the
// store: it must not answer with that end (a crash would roll it back) but
// once its commit has landed.
func TestAWaitingCallAnswersOnlyWithACommittedEnd(t *testing.T) {
	t.Parallel()
	st := enginetest.NewHeldStore(memory.New(memory.Options{}))
	exec := enginetest.NewExecutor()
	w := &watchedEngine{store: st, reading: make(chan struct{}, 16)}
	d := setupDirectOver(t, engine.Config{}, 0, st, exec, func(e *engine.Engine) mcp.Engine {
		w.Engine = e
		return w
	})
	t.Cleanup(st.Open) // before the engine's last commit
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

	st.Hold()
	exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.Waiting() == 1 })
	require.NoError(t, exec.Succeed(id, `{"success":true,"result":{"ok":true}}`))
	for len(w.reading) > 0 {
		<-w.reading
	}
	st.LetOne() // the start lands and wakes the call; the end stays held
	var res *sdk.CallToolResult
	for res == nil {
		select {
		case <-w.reading: // the call's read waits for the end's commit: let it land
			st.Open()
		case res = <-done:
		case <-ctx.Done():
			t.Fatal("the call did not answer")
		}
	}
	require.Empty(t, st.Uncommitted(), "the call is handed only committed states")
	require.False(t, res.IsError, textOf(res))
	stored, err := st.Store.Task(ctx, id)
	require.NoError(t, err)
	require.Equal(t, engine.StateSucceeded, stored.State, "it answered once the end was committed")
}
