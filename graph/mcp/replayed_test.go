package mcp_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/graph/model"
)

// gatedSubmissions holds every submission until n of them have arrived,
// and then lets them all through at once.
type gatedSubmissions struct {
	mcp.Mutations
	mu      sync.Mutex
	n       int
	release chan struct{}
}

func (g *gatedSubmissions) SubmitTask(ctx context.Context, in model.SubmitTaskInput) (*model.Task, bool, error) {
	g.mu.Lock()
	if g.n--; g.n == 0 {
		close(g.release)
	}
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return g.Mutations.SubmitTask(ctx, in)
}

// Identical keyed submit_task calls that reach the server together record
// one task, and exactly one of them says it submitted it: the others say
// the key named it, as the engine answered each. Sent again afterwards, the
// same call says so too.
func TestIdenticalKeyedSubmissionsAtOnceSayOnceThatTheySubmitted(t *testing.T) {
	t.Parallel()
	const calls = 4
	gate := &gatedSubmissions{n: calls, release: make(chan struct{})}
	d := setupDirectMutations(t, engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}, 0,
		memory.New(memory.Options{}), enginetest.NewExecutor(), nil, func(m mcp.Mutations) mcp.Mutations {
			gate.Mutations = m
			return gate
		})
	clients := make([]*client, calls)
	for i := range clients {
		clients[i] = d.connect(t, "planner")
	}
	args := map[string]any{"instruction": "summarise", "idempotencyKey": "step-1"}
	ctx := ctxFor(t)
	results := make([]*sdk.CallToolResult, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			results[i], errs[i] = c.CallTool(ctx, &sdk.CallToolParams{Name: "submit_task", Arguments: args})
		})
	}
	wg.Wait()
	submitted := 0
	for i, res := range results {
		require.NoError(t, errs[i])
		require.False(t, res.IsError, textOf(res))
		require.Equal(t, structured(t, results[0])["taskId"], structured(t, res)["taskId"])
		if strings.HasPrefix(textOf(res), "submitted task ") {
			submitted++
		} else {
			require.Contains(t, textOf(res), "nothing new was submitted")
		}
	}
	require.Equal(t, 1, submitted, "exactly one of the identical calls submitted the task")

	again := clients[0].call(t, "submit_task", args)
	require.Equal(t, structured(t, results[0])["taskId"], structured(t, again)["taskId"])
	require.Contains(t, textOf(again), "nothing new was submitted")
	tasks, err := d.eng.Tasks(ctx, engine.TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
}
