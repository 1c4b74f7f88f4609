package server_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A submitTasks whose selection reads no item's task asks the engine for
// the tasks' ids alone (no snapshots): it answers what a selection that
// reads the tasks answers, field for field, and its audit line names the
// same tasks. Each selection runs on a server of its own from the same
// start, over a batch with items refused before the engine, items the
// engine records REJECTED (QUEUE_FULL: recorded, refused) and items that
// depend on refused ones.
func TestABatchAnswersTheSameWhateverItSelectsOfItsTasks(t *testing.T) {
	t.Parallel()
	items := []map[string]any{}
	for i := range 12 {
		task := map[string]any{"agentId": "a", "action": map[string]any{"kind": "click", "selector": "css:#go"}}
		item := map[string]any{"task": task}
		switch i {
		case 2:
			task["agentId"] = "" // refused by the resolver
			item["key"] = "k2"
		case 3:
			task["dependsOn"] = []string{"k2"} // depends on a refused item
		case 5:
			task["timeoutMs"] = -1 // refused
		}
		items = append(items, item)
	}
	errFields := `error { code message field ids }`
	type run struct {
		data    map[string]any
		targets []string
		tasks   int
	}
	submit := func(t *testing.T, selection string) run {
		var logs lockedBuffer
		b := setup(t, func(o *setupOptions) {
			o.logs = &logs
			o.config = engine.Config{MaxInFlight: 1, MaxQueuedPerAgent: 4}
		})
		res, _, err := b.c.Raw(ctxFor(t), client.Request{
			Query:     `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { ` + selection + ` } }`,
			Variables: map[string]any{"in": map[string]any{"items": items}},
		})
		require.NoError(t, err)
		require.Empty(t, res.Errors)
		var data map[string]any
		require.NoError(t, json.Unmarshal(res.Data, &data))
		waitfor.Eventually(t, "the audit line", func() bool { return strings.Contains(logs.String(), "op=submitTasks") })
		line := regexp.MustCompile(`op=submitTasks .*`).FindString(logs.String())
		var targets []string
		for _, m := range regexp.MustCompile(`"(\w+):([^"]*)"`).FindAllStringSubmatch(line[strings.Index(line, "targets="):], -1) {
			targets = append(targets, m[1])
			if m[1] == "task" {
				_, err := b.eng.Task(ctxFor(t), m[2])
				require.NoError(t, err, "the audit names a task the engine holds")
			}
		}
		n, err := b.eng.CountTasks(ctxFor(t), engine.TaskFilter{})
		require.NoError(t, err)
		total := 0
		for _, c := range n {
			total += c
		}
		return run{data: data, targets: targets, tasks: total}
	}
	bare := submit(t, `batchId accepted refused items { index key `+errFields+` }`)
	full := submit(t, `batchId accepted refused items { index key task { id state } `+errFields+` }`)

	got := bare.data["submitTasks"].(map[string]any)
	want := full.data["submitTasks"].(map[string]any)
	require.NotNil(t, got["batchId"])
	require.Equal(t, want["accepted"], got["accepted"])
	require.Equal(t, want["refused"], got["refused"])
	require.Equal(t, 4.0, got["accepted"], "the agent's queue holds four")
	for i, it := range want["items"].([]any) {
		item := it.(map[string]any)
		delete(item, "task")
		require.Equal(t, item, got["items"].([]any)[i], "item %d", i)
	}
	require.Equal(t, full.tasks, bare.tasks)
	require.Equal(t, full.targets, bare.targets, "the audit names the same kinds of target in the same order")
	require.Equal(t, bare.tasks, strings.Count(strings.Join(bare.targets, ","), "task"), "every task recorded is named")
}

// A selection that reaches an item's task through a fragment gets the
// tasks, as a field does.
func TestABatchSelectingItsTasksThroughFragmentsGetsThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	items := []map[string]any{{"task": map[string]any{"agentId": "a", "action": map[string]any{"kind": "click"}}}}
	for _, q := range []string{
		`mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { items { ...I } } } fragment I on SubmitTaskResult { task { id } }`,
		`mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { ... on SubmitTasksPayload { items { ... on SubmitTaskResult { task { id } } } } } }`,
	} {
		var out struct {
			SubmitTasks struct {
				Items []struct{ Task *struct{ ID string } }
			}
		}
		require.NoError(t, b.c.Do(ctxFor(t), q, map[string]any{"in": map[string]any{"items": items}}, &out))
		require.Len(t, out.SubmitTasks.Items, 1)
		require.NotNil(t, out.SubmitTasks.Items[0].Task, q)
		require.NotEmpty(t, out.SubmitTasks.Items[0].Task.ID, q)
	}
}
