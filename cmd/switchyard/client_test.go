package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/manager"
)

// startServer runs `switchyard serve` on a loopback port (memory store, no
// browser instance) and returns its base URL.
func startServer(t *testing.T) string {
	t.Helper()
	return strings.TrimSuffix(startServe(t, "--listen", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "switchyard.db"),
		"--no-local-instance", "--log-level", "error", "--shutdown-grace", "100ms").URL, "/graphql")
}

// result is what one run of the binary's command line gave.
type result struct {
	code           int
	stdout, stderr string
}

// sw runs `switchyard args…` against server with an optional stdin file.
func sw(t *testing.T, server string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	// A bound, not a claim: loading a plugin compiles it on the server.
	ctx, cancel := context.WithTimeout(context.Background(), serveStartTimeout)
	defer cancel()
	if server != "" {
		args = append(args, "--server", server)
	}
	code := run(ctx, args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestTaskSubmitFromJSONLSubmitsEveryLineAndNamesTheRefusedOnes(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	var b strings.Builder
	for i := range 250 {
		fmt.Fprintf(&b, `{"agentId": "bulk", "lane": "team", "action": {"kind": "click", "selector": "#b%d"}, "labels": [{"key": "n", "value": "%d"}]}`+"\n", i, i)
		if i == 120 {
			b.WriteString("\n") // blank lines are skipped
			b.WriteString(`{"agentId": "bulk", "lane": "no-such-lane", "action": {"kind": "click"}}` + "\n")
			b.WriteString(`{"agentId": "bulk", "priority": "URGENT", "action": {"kind": "click"}}` + "\n")
		}
	}
	file := writeFile(t, "tasks.jsonl", b.String())

	// Pause the lane first so the tasks stay queued.
	require.Equal(t, 0, sw(t, server, "lane", "pause", "team").code)
	res := sw(t, server, "task", "submit", "--file", file, "--batch", "40")
	require.Equal(t, cli.ExitPartial, res.code, res.stderr)
	ids := lines(res.stdout)
	require.Len(t, ids, 250, "one id per accepted line, on stdout")
	require.Contains(t, res.stderr, "tasks.jsonl:123: INVALID_INPUT: unknown lane \"no-such-lane\" (lane)")
	require.Contains(t, res.stderr, "tasks.jsonl:124: GRAPHQL_VALIDATION_FAILED: URGENT is not a valid Priority (priority)")
	require.Contains(t, res.stderr, "submitted 252 of 252 tasks from")
	require.Contains(t, res.stderr, "250 accepted, 2 refused")
	require.NotContains(t, res.stderr, "\r", "no progress bar when stderr is not a terminal")

	// The ids are the tasks of the file, in its order.
	list := sw(t, server, "task", "list", "--agent", "bulk", "--limit", "1000", "--order", "oldest", "--json")
	require.Equal(t, 0, list.code, list.stderr)
	got := lines(list.stdout)
	require.Len(t, got, 250)
	for i, line := range got {
		var task cli.TaskInfo
		require.NoError(t, json.Unmarshal([]byte(line), &task))
		require.Equal(t, ids[i], task.Id)
		require.Equal(t, cli.TaskStateQueued, task.State)
		require.Equal(t, []cli.Label{{Key: "n", Value: strconv.Itoa(i)}}, task.Labels)
	}

	// A malformed line is a usage error and nothing is sent.
	bad := writeFile(t, "bad.jsonl", `{"agentId": "bad", "action": {"kind": "click"}}`+"\n"+`{"agentId": "bad",`+"\n")
	res = sw(t, server, "task", "submit", "--file", bad)
	require.Equal(t, cli.ExitUsage, res.code)
	require.Contains(t, res.stderr, "bad.jsonl:2: want a JSON object")
	require.Empty(t, lines(sw(t, server, "task", "list", "--agent", "bad", "--json").stdout), "no line of a malformed file is submitted")

	// With --json, one result per line, refused ones with their error.
	mixed := writeFile(t, "mixed.jsonl", `{"agentId": "mixed", "action": {"kind": "click"}}`+"\n"+`{"agentId": "mixed", "lane": "nope", "action": {"kind": "click"}}`+"\n")
	res = sw(t, server, "task", "submit", "--file", mixed, "--json")
	require.Equal(t, cli.ExitPartial, res.code)
	var first, second struct {
		Line  int
		ID    string
		Error *struct{ Code string }
	}
	out := lines(res.stdout)
	require.Len(t, out, 2)
	require.NoError(t, json.Unmarshal([]byte(out[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(out[1]), &second))
	require.Equal(t, 1, first.Line)
	require.NotEmpty(t, first.ID)
	require.Nil(t, first.Error)
	require.Equal(t, 2, second.Line)
	require.Equal(t, "INVALID_INPUT", second.Error.Code)
}

func TestTaskListPrintsATableWithFilters(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	require.Equal(t, 0, sw(t, server, "lane", "pause", "cron").code)
	a := sw(t, server, "task", "submit", "--agent", "lister", "--lane", "cron", "--url", "https://example.com", "--label", "team=red")
	require.Equal(t, 0, a.code, a.stderr)
	b := sw(t, server, "task", "submit", "--agent", "other", "--lane", "cron", "--action", "click", "--selector", "#go")
	require.Equal(t, 0, b.code, b.stderr)

	res := sw(t, server, "task", "list", "--agent", "lister")
	require.Equal(t, 0, res.code, res.stderr)
	rows := lines(res.stdout)
	require.Len(t, rows, 2)
	require.Regexp(t, `^ID\s+STATE\s+AGENT\s+LANE\s+PRIORITY\s+ATTEMPTS\s+SUBMITTED\s+REASON$`, rows[0])
	require.Regexp(t, `^`+strings.TrimSpace(a.stdout)+`\s+QUEUED\s+lister\s+cron\s+NORMAL\s+0\s+\d+s ago`, rows[1])

	res = sw(t, server, "task", "list", "--label", "team=red", "--state", "queued,running", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	require.Len(t, lines(res.stdout), 1)
	require.Contains(t, res.stdout, `"url":"https://example.com"`)

	got := sw(t, server, "task", "get", strings.TrimSpace(b.stdout))
	require.Equal(t, 0, got.code, got.stderr)
	require.Regexp(t, `state:\s+QUEUED`, got.stdout)
	require.Regexp(t, `action:\s+click #go`, got.stdout)
	require.Regexp(t, `position:\s+0`, got.stdout)
}

// lastSeq reads the server's latest event seq.
func lastSeq(t *testing.T, server string) int64 {
	t.Helper()
	var res struct{ Stats struct{ LastSeq int64 } }
	require.NoError(t, client.New(server+"/graphql").Do(context.Background(), `{ stats { lastSeq } }`, nil, &res))
	return res.Stats.LastSeq
}

func TestWatchStreamsEventsAndResumesAfterTheSeqItPrinted(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	require.Equal(t, 0, sw(t, server, "lane", "pause", "subagent").code)
	from := lastSeq(t, server)

	// Live: the watch starts before the task exists.
	type watched struct {
		res result
	}
	got := make(chan watched, 1)
	go func() {
		got <- watched{sw(t, server, "watch", "--agent", "watcher", "--after", strconv.FormatInt(from, 10), "--count", "2", "--json")}
	}()
	sub := sw(t, server, "task", "submit", "--agent", "watcher", "--lane", "subagent", "--action", "click")
	require.Equal(t, 0, sub.code, sub.stderr)
	id := strings.TrimSpace(sub.stdout)
	// The second event: cancel it.
	require.Equal(t, 0, sw(t, server, "task", "cancel", id, "--reason", "seen enough").code)
	var w watched
	select {
	case w = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not end after two events")
	}
	require.Equal(t, 0, w.res.code, w.res.stderr)
	evs := lines(w.res.stdout)
	require.Len(t, evs, 2)
	var e1, e2 cli.Event
	require.NoError(t, json.Unmarshal([]byte(evs[0]), &e1))
	require.NoError(t, json.Unmarshal([]byte(evs[1]), &e2))
	require.Equal(t, id, e1.TaskID)
	require.Equal(t, "QUEUED", e1.To)
	require.Equal(t, "CANCELLED", e2.To)
	require.Equal(t, "seen enough", e2.Reason)
	require.Contains(t, w.res.stderr, fmt.Sprintf("last seq %d (resume with --after %d)", e2.Seq, e2.Seq))

	// Resuming after the first event gives the second again, and only it.
	res := sw(t, server, "watch", "--task", id, "--after", strconv.FormatInt(e1.Seq, 10), "--until-done")
	require.Equal(t, 0, res.code, res.stderr)
	out := lines(res.stdout)
	require.Len(t, out, 1, "after seq %d only the cancellation is left", e1.Seq)
	require.Regexp(t, fmt.Sprintf(`^\s*%d \d\d:\d\d:\d\d\.\d{3} STATE\s+%s  QUEUED → CANCELLED  agent=watcher lane=subagent  seen enough$`, e2.Seq, id), out[0])
	require.NotContains(t, res.stdout, "\033[", "no colours when stdout is not a terminal")

	// --color always paints the states.
	res = sw(t, server, "watch", "--task", id, "--after", strconv.FormatInt(from, 10), "--until-done", "--color", "always")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "\033[2m") // dim seq and time
	require.Contains(t, res.stdout, "\033[34mQUEUED\033[0m")

	// A resume point the server refuses gives its error, and no resume
	// hint that would be refused again.
	res = sw(t, server, "watch", "--after", "99999999")
	require.NotEqual(t, 0, res.code)
	require.Contains(t, res.stderr, "INVALID_INPUT")
	require.NotContains(t, res.stderr, "last seq")
}

// watchBounded runs `switchyard watch args…` and fails the test if it does
// not end: the bug it guards against is a watch that never does.
func watchBounded(t *testing.T, server string, args ...string) result {
	t.Helper()
	return awaitWatch(t, watchAsync(t, server, args...), args)
}

func watchAsync(t *testing.T, server string, args ...string) <-chan result {
	got := make(chan result, 1)
	go func() { got <- sw(t, server, append([]string{"watch"}, args...)...) }()
	return got
}

func awaitWatch(t *testing.T, got <-chan result, args []string) result {
	t.Helper()
	select {
	case res := <-got:
		return res
	case <-time.After(30 * time.Second):
		t.Fatalf("watch %v did not end", args)
		return result{}
	}
}

func TestWatchUntilDoneReportsTasksThatHaveAlreadyEnded(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	require.Equal(t, 0, sw(t, server, "lane", "pause", "subagent").code)
	submit := func() string {
		res := sw(t, server, "task", "submit", "--agent", "ud", "--lane", "subagent", "--action", "click")
		require.Equal(t, 0, res.code, res.stderr)
		return strings.TrimSpace(res.stdout)
	}
	ended := submit()
	require.Equal(t, 0, sw(t, server, "task", "cancel", ended, "--reason", "over before the watch").code)

	// Ended before the watch began: its end is printed, and the watch ends.
	res := watchBounded(t, server, "--task", ended, "--until-done")
	require.Equal(t, 0, res.code, res.stderr)
	out := lines(res.stdout)
	require.Len(t, out, 1, res.stdout)
	require.Regexp(t, fmt.Sprintf(`^\s*\d+ \d\d:\d\d:\d\d\.\d{3} STATE\s+%s  · → CANCELLED  agent=ud lane=subagent  over before the watch$`, ended), out[0])

	res = watchBounded(t, server, "--task", ended, "--until-done", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var e cli.Event
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &e))
	require.Equal(t, cli.Event{Seq: e.Seq, Kind: "STATE", At: e.At, TaskID: ended, AgentID: "ud", Lane: "subagent", To: "CANCELLED", Reason: "over before the watch"}, e)
	require.Positive(t, e.Seq)

	// One ended, one running that ends while the watch starts: whether
	// it ends before the watch reads it, between the read and the
	// subscription, or after, both ends are printed and the watch ends.
	running := submit()
	args := []string{"--task", ended + "," + running, "--until-done"}
	got := watchAsync(t, server, args...)
	require.Equal(t, 0, sw(t, server, "task", "cancel", running, "--reason", "ends as the watch starts").code)
	res = awaitWatch(t, got, args)
	require.Equal(t, 0, res.code, res.stderr)
	out = lines(res.stdout)
	require.Len(t, out, 2, res.stdout)
	require.Contains(t, res.stdout, ended+"  · → CANCELLED")
	require.Regexp(t, running+"  (QUEUED|·) → CANCELLED  agent=ud lane=subagent  ends as the watch starts", res.stdout)

	// A task the server does not know is an error, not a wait.
	res = watchBounded(t, server, "--task", "01NOSUCHTASK0000000000000", "--until-done")
	require.Equal(t, cli.ExitNotFound, res.code, res.stderr)
	require.Contains(t, res.stderr, "NOT_FOUND")
	require.Empty(t, res.stdout)
}

func TestCancelAndLaneVerbsChangeTheServer(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	res := sw(t, server, "lane", "update", "team", "--max-in-flight", "0", "--max-queued", "500", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var lane cli.LaneInfo
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &lane))
	require.Equal(t, 0, lane.MaxInFlight)
	require.Equal(t, 500, lane.MaxQueued)

	var ids []string
	for range 3 {
		r := sw(t, server, "task", "submit", "--agent", "c", "--lane", "team", "--session", "s1", "--action", "click")
		require.Equal(t, 0, r.code, r.stderr)
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	res = sw(t, server, "task", "cancel", ids[0])
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, ids[0]+"\tCANCELLED\n", res.stdout)

	// By filter: the rest of the session.
	res = sw(t, server, "task", "cancel", "--session", "s1")
	require.Equal(t, 0, res.code, res.stderr)
	require.ElementsMatch(t, ids[1:], lines(res.stdout))
	require.Contains(t, res.stderr, "cancelled 2 tasks")

	res = sw(t, server, "lane", "list")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^team\s+0\s+0\s+0\s+500\s+running\s+reject`, res.stdout)
	res = sw(t, server, "lane", "update", "team", "--pause", "--drop-policy", "drop-oldest")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^team\s+0\s+0\s+0\s+500\s+paused\s+drop-oldest\s`, res.stdout, "spelt as the flag and the configuration spell it")
}

func TestClientVerbsExitWithTheDocumentedCodes(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	require.Equal(t, 0, sw(t, server, "lane", "pause", "main").code)
	sub := sw(t, server, "task", "submit", "--action", "click")
	require.Equal(t, 0, sub.code, sub.stderr)
	id := strings.TrimSpace(sub.stdout)
	require.Equal(t, 0, sw(t, server, "task", "cancel", id).code)

	for _, c := range []struct {
		name   string
		args   []string
		server string
		code   int
		stderr string
	}{
		{"cancelling an ended task is a conflict", []string{"task", "cancel", id}, server, cli.ExitConflict, "switchyard task: cancel " + id + ": CONFLICT: "},
		{"an unknown task is not found", []string{"task", "get", "01NOSUCHTASK0000000000000"}, server, cli.ExitNotFound, "NOT_FOUND"},
		{"an unknown lane is not found", []string{"lane", "pause", "nope"}, server, cli.ExitNotFound, "NOT_FOUND"},
		{"reset of a task that is not parked is a conflict", []string{"task", "reset", id}, server, cli.ExitConflict, "CONFLICT"},
		{"a missing argument is a usage error", []string{"task", "get"}, server, cli.ExitUsage, "missing argument"},
		{"an unknown verb is a usage error", []string{"task", "frobnicate"}, server, cli.ExitUsage, `unknown verb "frobnicate"`},
		{"a task with nothing to do is a usage error", []string{"task", "submit"}, server, cli.ExitUsage, "say what to do"},
		{"--file with one-task flags is a usage error", []string{"task", "submit", "--file", "x.jsonl", "--url", "https://example.com"}, server, cli.ExitUsage, "--url describe one task"},
		{"a bad server URL is a usage error", []string{"lane", "list"}, "ftp://example.test", cli.ExitUsage, "--server"},
		{"an unreachable server", []string{"task", "list"}, "http://127.0.0.1:1", cli.ExitUnreachable, "connection refused"},
		{"a server that does not speak GraphQL", []string{"lane", "list"}, server + "/healthz", cli.ExitUnreachable, "HTTP"},
		{"bad input is an API error", []string{"task", "submit", "--action", "click", "--agent", strings.Repeat("x", 300)}, server, cli.ExitAPI, "INVALID_INPUT"},
		// An enum flag's value the schema does not have is the caller's
		// mistake (exit 2), said before anything is sent, with the values
		// there are: not the server's GRAPHQL_VALIDATION_FAILED (exit 1).
		{"an unknown state is a usage error", []string{"task", "list", "--state", "queued,bogus"}, server, cli.ExitUsage, `--state "bogus": want queued, waiting, assigned, running, retry-wait,`},
		{"an unknown state to cancel is a usage error", []string{"task", "cancel", "--state", "bogus"}, server, cli.ExitUsage, `--state "bogus"`},
		{"an unknown state to watch is a usage error", []string{"watch", "--state", "bogus"}, server, cli.ExitUsage, `--state "bogus"`},
		{"an unknown drop policy is a usage error", []string{"lane", "update", "main", "--drop-policy", "drop-newest"}, server, cli.ExitUsage, `--drop-policy "drop-newest": want reject, drop-oldest`},
		{"an unknown priority is a usage error", []string{"task", "submit", "--action", "click", "--priority", "urgent"}, server, cli.ExitUsage, `--priority "urgent"`},
		{"an unknown instance kind is a usage error", []string{"instance", "register", "x", "http://127.0.0.1:1", "--kind", "robot"}, server, cli.ExitUsage, `--kind "robot": want instance, pinchtab, chat`},
		{"an unknown policy slot is a usage error", []string{"plugin", "set", "scheduling", "edf"}, server, cli.ExitUsage, `SLOT "scheduling": want selection, fairness, retry`},
	} {
		res := sw(t, c.server, c.args...)
		require.Equal(t, c.code, res.code, "%s: %s", c.name, res.stderr)
		require.Contains(t, res.stderr, c.stderr, c.name)
	}

	// A full queue asks to retry later.
	require.Equal(t, 0, sw(t, server, "lane", "update", "main", "--max-queued", "1").code)
	require.Equal(t, 0, sw(t, server, "task", "submit", "--action", "click").code)
	res := sw(t, server, "task", "submit", "--action", "click")
	require.Equal(t, cli.ExitRetry, res.code, res.stderr)
	require.Contains(t, res.stderr, "QUEUE_FULL")
	// The refused task was recorded REJECTED: the error names it.
	m := regexp.MustCompile(`the server recorded the task REJECTED: (\S+) \(switchyard task get (\S+)\)\n$`).FindStringSubmatch(res.stderr)
	require.NotNil(t, m, res.stderr)
	require.Equal(t, m[1], m[2])
	require.Empty(t, res.stdout)
	got := sw(t, server, "task", "get", m[1], "--json")
	require.Equal(t, 0, got.code, got.stderr)
	var rejected cli.TaskInfo
	require.NoError(t, json.Unmarshal([]byte(got.stdout), &rejected))
	require.Equal(t, cli.TaskStateRejected, rejected.State)
}

func TestInstanceVerbsRegisterAndList(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	browser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(browser.Close)
	token := writeFile(t, "token", "s3cret\n")
	res := sw(t, server, "instance", "register", "b1", browser.URL, "--capacity", "4", "--label", "zone=a", "--token-file", token, "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var in cli.InstanceInfo
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &in))
	require.Equal(t, "b1", in.Id)
	require.Equal(t, 4, in.Capacity)
	require.True(t, in.HasToken)
	require.Equal(t, []cli.Label{{Key: "zone", Value: "a"}}, in.Labels)

	res = sw(t, server, "instance", "register", "b1", browser.URL)
	require.Equal(t, cli.ExitConflict, res.code, "the id is taken: %s", res.stderr)

	res = sw(t, server, "instance", "list")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^b1\s+instance\s+(HEALTHY|UNKNOWN)\s+`, res.stdout)
	require.Contains(t, res.stdout, browser.URL)

	res = sw(t, server, "instance", "remove", "b1")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "removed b1\n", res.stdout)
	res = sw(t, server, "instance", "remove", "b1")
	require.Equal(t, cli.ExitNotFound, res.code, res.stderr)
	require.Contains(t, res.stderr, "remove b1: ", "the error names the verb and its target")
}

func TestPluginVerbsLoadAssignAndUnloadAPolicy(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	// Loading compiles the module on the server: allow a busy machine time.
	res := sw(t, server, "plugin", "load", "edf-test", "../../examples/plugins/edf.wasm", "--json", "--request-timeout", serveStartTimeout.String())
	require.Equal(t, 0, res.code, res.stderr)
	var p cli.PluginInfo
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &p))
	require.Equal(t, cli.PolicySlotSelection, p.Slot)
	require.Empty(t, p.ActiveIn, "a loaded plugin is not used until it is assigned")

	res = sw(t, server, "plugin", "set", "selection", "edf-test", "--lane", "main")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `^SLOT  +SCOPE  +POLICY\n`, res.stdout, "a table like plugin list's, aligned with spaces")
	require.Regexp(t, `(?m)^SELECTION  +lane main  +edf-test$`, res.stdout)
	res = sw(t, server, "plugin", "list")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^SELECTION\s+lane main\s+edf-test$`, res.stdout)
	require.Regexp(t, `(?m)^edf-test\s+SELECTION\s+wasm\s+ACTIVE\s+-\s+lane:main\s`, res.stdout)
	require.Regexp(t, `(?m)^native:priority\s.*\s0\s+-\s+-\s+-\s*$`, res.stdout, "a policy with no timed decision prints no percentiles (nor a reason)")
	require.Regexp(t, `(?m)^edf-test\s.*\s-\s+-\s+-\s*$`, res.stdout, "nor does a plugin nobody has asked yet")

	res = sw(t, server, "plugin", "enable", "edf-test")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "enabled edf-test: ACTIVE\n", res.stdout, "a sentence, like its siblings' (configured, loaded, unloaded)")
	res = sw(t, server, "plugin", "enable", "no-such-plugin")
	require.Equal(t, cli.ExitNotFound, res.code, res.stderr)
	require.Contains(t, res.stderr, "enable no-such-plugin: ")

	res = sw(t, server, "plugin", "unload", "edf-test")
	require.Equal(t, cli.ExitConflict, res.code, "a plugin in use cannot be unloaded: %s", res.stderr)
	require.Contains(t, res.stderr, "unload edf-test: ", "the error names the verb and its target")
	require.Equal(t, 0, sw(t, server, "plugin", "set", "selection", "--lane", "main").code)
	res = sw(t, server, "plugin", "unload", "edf-test")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "unloaded edf-test\n", res.stdout)

	res = sw(t, server, "plugin", "load", "garbage", writeFile(t, "garbage.wasm", "not wasm"))
	require.Equal(t, cli.ExitAPI, res.code)
	require.Contains(t, res.stderr, "PLUGIN_INVALID")
	var gerrs client.Errors
	require.ErrorAs(t, client.New(server+"/graphql").Do(context.Background(), `mutation($w: String!) { loadPlugin(input: {name: "garbage", wasmBase64: $w}) { name } }`,
		map[string]any{"w": "bm90IHdhc20="}, nil), &gerrs)
	require.Equal(t, "PLUGIN_INVALID", gerrs[0].Code())
	require.Equal(t, "input.wasmBase64", gerrs[0].Extensions["field"], "the field is the input's, not the manager's")
	res = sw(t, server, "plugin", "frobnicate")
	require.Equal(t, cli.ExitUsage, res.code)
}

// The largest module plugins.maxWasmBytes allows (16 MiB) loads through
// `switchyard plugin load` with the default request body limit (4 MiB):
// the server lets an admin's request hold it in base64.
func TestPluginLoadTakesTheLargestModule(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	mod, ok := builtin.ForSlot(policy.SlotRetry)
	require.True(t, ok)
	const maxBytes = manager.DefaultMaxWasmBytes
	name := []byte{3, 'p', 'a', 'd'}
	size := maxBytes - len(mod.Wasm) - 1 - 4 // a custom section: id, a 4-byte size, then name and padding
	wasm := append(append([]byte(nil), mod.Wasm...), 0,
		byte(size&0x7F|0x80), byte(size>>7&0x7F|0x80), byte(size>>14&0x7F|0x80), byte(size>>21&0x7F))
	wasm = append(wasm, name...)
	wasm = append(wasm, make([]byte, maxBytes-len(wasm))...)
	path := filepath.Join(t.TempDir(), "largest.wasm")
	require.NoError(t, os.WriteFile(path, wasm, 0o600))

	res := sw(t, server, "plugin", "load", "largest", path, "--json", "--request-timeout", serveStartTimeout.String())
	require.Equal(t, 0, res.code, res.stderr)
	var p cli.PluginInfo
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &p))
	require.Equal(t, maxBytes, p.Size)
}

// `instance -h` names the client verbs of the command besides the
// standalone instance's flags: both are `switchyard instance`.
func TestInstanceHelpNamesItsVerbs(t *testing.T) {
	t.Parallel()
	res := sw(t, "", "instance", "-h")
	require.Equal(t, 0, res.code, res.stderr)
	for _, v := range cli.InstanceVerbs() {
		require.Regexp(t, `(?m)^\s+`+v.Name+`\s+\S`, res.stderr)
	}
	require.Contains(t, res.stderr, "-listen", "and the standalone instance's flags")
}

// `task get` shows a leased task's lease and each attempt's error code, the
// one the lane's retry policy was given.
func TestTaskGetShowsTheLeaseAndEachAttemptsErrorCode(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	ctx := context.Background()
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(ctx, `mutation { createLane(name: "jobs", input: {pull: true, retryPolicy: {maxAttempts: 3, backoffMs: 60000}}) { pull } }`, nil, nil))
	var sub struct{ SubmitTask struct{ ID string } }
	require.NoError(t, c.Do(ctx, `mutation { submitTask(input: {agentId: "planner", lane: "jobs", action: {kind: "crawl"}}) { id } }`, nil, &sub))
	id := sub.SubmitTask.ID
	var leased struct{ LeaseTasks []struct{ LeaseID string } }
	require.NoError(t, c.Do(ctx, `mutation { leaseTasks(lane: "jobs", leaseForMs: 600000) { leaseId } }`, nil, &leased))
	require.Len(t, leased.LeaseTasks, 1)

	got := sw(t, server, "task", "get", id)
	require.Equal(t, 0, got.code, got.stderr)
	require.Regexp(t, `(?m)^lease:\s+attempt 1( by \S+)?, leased \d{4}-\d\d-\d\dT\S+, expires \d{4}-\d\d-\d\dT\S+$`, got.stdout)
	require.Regexp(t, `(?m)^1\s.*\s+running\s+NONE\s*$`, got.stdout, "the running attempt has no code yet")

	require.NoError(t, c.Do(ctx, `mutation($id: ID!) { failTask(leaseId: $id, error: "upstream answered 503", code: "upstream_503") { leaseId } }`,
		map[string]any{"id": leased.LeaseTasks[0].LeaseID}, nil))
	got = sw(t, server, "task", "get", id)
	require.Equal(t, 0, got.code, got.stderr)
	require.Regexp(t, `state:\s+RETRY_WAIT`, got.stdout)
	require.NotContains(t, got.stdout, "lease:", "the lease ended with the attempt")
	require.Regexp(t, `(?m)^#\s+INSTANCE\s+TAB\s+ASSIGNED\s+TAB TIME\s+ACTION\s+RAN\s+CLASS\s+HTTP\s+CODE\s+FAULT\s+ERROR$`, got.stdout)
	require.Regexp(t, `(?m)^1\s.*\s+TRANSIENT\s+upstream_503\s+upstream answered 503$`, got.stdout)

	// --json carries every field GraphQL gives an attempt.
	got = sw(t, server, "task", "get", id, "--json")
	require.Equal(t, 0, got.code, got.stderr)
	var js struct{ Attempts []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(got.stdout), &js))
	require.Len(t, js.Attempts, 1)
	for _, k := range []string{"tabTimeMs", "actionTimeMs", "instanceFault", "errorCode"} {
		require.Contains(t, js.Attempts[0], k)
	}
	require.Equal(t, false, js.Attempts[0]["instanceFault"], "a worker's failure is the task's, not its instance's")
}

// `task submit` with an idempotency key says on stderr when the key named
// a task submitted before; its stdout is the task's id either way.
func TestTaskSubmitSaysWhenItsKeyNamedAnEarlierTask(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	require.Equal(t, 0, sw(t, server, "lane", "pause", "cron").code)
	args := []string{"task", "submit", "--agent", "resender", "--lane", "cron", "--url", "https://example.com", "--idempotency-key", "step-1"}
	first := sw(t, server, args...)
	require.Equal(t, 0, first.code, first.stderr)
	require.Empty(t, first.stderr)
	again := sw(t, server, args...)
	require.Equal(t, 0, again.code, again.stderr)
	require.Equal(t, first.stdout, again.stdout)
	require.Equal(t, fmt.Sprintf("idempotency key %q names task %s, submitted before: nothing new was submitted\n", "step-1", strings.TrimSpace(first.stdout)), again.stderr)
}

// An --until-done whose --kind or --state would keep a task's end out of
// the stream is refused at once (usage, exit 2), rather than waiting for
// an end it can never see.
func TestWatchUntilDoneRefusesAFilterThatHidesTheEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args, want []string }{
		{[]string{"--kind", "held"}, []string{"--until-done with --kind held: a task ends with a state event", "add state to --kind"}},
		{[]string{"--state", "succeeded"}, []string{"--until-done with --state SUCCEEDED: a task that ends FAILED, CANCELLED, EXPIRED, REJECTED, PARKED would not be seen to end"}},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"watch", "--server", "http://127.0.0.1:9", "--task", "01JD2Z0000000000000000000A", "--until-done"}, tc.args...)
		require.Equal(t, 2, run(context.Background(), args, &out, &errOut), errOut.String())
		for _, w := range tc.want {
			require.Contains(t, errOut.String(), w)
		}
	}
}

// --until-done ends at PARKED too: a task whose retry budget is spent
// stays there until someone resets it, and a watch that waited for its
// end would wait forever.
func TestWatchUntilDoneEndsAtAParkedTask(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	ctx := context.Background()
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(ctx, `mutation { createLane(name: "jobs", input: {pull: true}) { name } }`, nil, nil))
	res := sw(t, server, "task", "submit", "--agent", "w", "--lane", "jobs", "--action", "click", "--max-attempts", "1")
	require.Equal(t, 0, res.code, res.stderr)
	id := strings.TrimSpace(res.stdout)
	var lease struct {
		LeaseTasks []struct{ LeaseID string }
	}
	require.NoError(t, c.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 1, leaseForMs: 60000) { leaseId } }`, nil, &lease))
	require.Len(t, lease.LeaseTasks, 1)
	var failed struct {
		FailTask struct{ Task struct{ State string } }
	}
	require.NoError(t, c.Do(ctx, `mutation($l: ID!) { failTask(leaseId: $l, error: "upstream 503", retryable: true) { task { state } } }`,
		map[string]any{"l": lease.LeaseTasks[0].LeaseID}, &failed))
	require.Equal(t, "PARKED", failed.FailTask.Task.State)

	res = watchBounded(t, server, "--task", id, "--until-done")
	require.Equal(t, 0, res.code, res.stderr)
	out := lines(res.stdout)
	require.Len(t, out, 1, res.stdout)
	require.Contains(t, out[0], "→ PARKED")
}

// The task verbs that act on ids take --json, before the command or after
// the verb: one {"id", "state"} object a task.
func TestTaskVerbsThatActPrintJSON(t *testing.T) {
	t.Parallel()
	server := startServer(t)
	require.Equal(t, 0, sw(t, server, "lane", "pause", "subagent").code)
	res := sw(t, server, "task", "submit", "--agent", "j", "--lane", "subagent", "--action", "click")
	require.Equal(t, 0, res.code, res.stderr)
	id := strings.TrimSpace(res.stdout)
	for _, args := range [][]string{
		{"--json", "task", "cancel", id, "--reason", "no longer needed"},
		{"task", "retry", id, "--json"},
	} {
		res = sw(t, server, args...)
		require.Equal(t, 0, res.code, "%v: %s", args, res.stderr)
		var got struct{ ID, State string }
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &got), res.stdout)
		require.NotEmpty(t, got.ID)
		require.NotEmpty(t, got.State)
		if args[1] == "task" && args[2] == "cancel" {
			require.Equal(t, id, got.ID)
			require.Equal(t, "CANCELLED", got.State)
		}
	}
	// With filters: the ids cancelled (the retry's new run, queued).
	res = sw(t, server, "task", "cancel", "--agent", "j", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	out := lines(res.stdout)
	require.NotEmpty(t, out)
	for _, l := range out {
		var got struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(l), &got), l)
		require.NotEmpty(t, got.ID)
	}
}
