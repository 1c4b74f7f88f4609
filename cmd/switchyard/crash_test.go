package main

// The crash test: the real binary, the SQLite store, submissions under load,
// kill -9 at random moments, restarts — and then, through the API, every task
// whose submission was acknowledged is there, ended in exactly one terminal
// state, and ran no more often than its recorded attempts.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// built is the switchyard binary the tests that run real processes share:
// built once per run of the tests, removed by TestMain.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildBinary returns the path of a switchyard binary built from this tree.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "switchyard-test-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "switchyard")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	require.NoError(t, built.err)
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// startProcess starts `switchyard serve` and returns its GraphQL URL. A
// process that exits before it is ready fails the test at once, and a
// failure shows the end of the process's log.
func startProcess(t *testing.T, bin, config string) (*exec.Cmd, string) {
	t.Helper()
	cmd, url, _ := startProcessLogged(t, bin, config)
	return cmd, url
}

// startProcessLogged is startProcess, and returns the process's log too.
func startProcessLogged(t *testing.T, bin, config string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", config)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if testing.Verbose() {
		cmd.Stderr = io.MultiWriter(os.Stderr, logs)
	}
	require.NoError(t, cmd.Start())
	tail := func() string {
		s := logs.String()
		return s[max(0, len(s)-4096):]
	}
	lines := bufio.NewScanner(stdout)
	urlc := make(chan string, 1)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for lines.Scan() {
			if m := servingLine.FindStringSubmatch(lines.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	select {
	case url := <-urlc:
		return cmd, url, logs
	case <-closed:
		select {
		case url := <-urlc:
			return cmd, url, logs
		default:
		}
		_ = cmd.Wait()
		t.Fatalf("switchyard serve exited before it was ready (%v); its log ends:\n%s", cmd.ProcessState, tail())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("switchyard serve did not start within 60 s; its log ends:\n%s", tail())
	}
	return nil, "", nil
}

func TestKillNineUnderLoadLosesNoAcknowledgedTask(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and crashes the real binary")
	}
	t.Parallel()
	// normal: what a process crash keeps without a flush per commit; full
	// (the default): the write-ahead log written out at open, each commit
	// rewriting its blocks.
	for _, mode := range []string{"normal", "full"} {
		t.Run("sync "+mode, func(t *testing.T) {
			t.Parallel()
			killNineUnderLoad(t, mode)
		})
	}
}

func killNineUnderLoad(t *testing.T, syncMode string) {
	bin := buildBinary(t)
	inst := newFleetInstance(t, 5*time.Millisecond)
	dir := t.TempDir()
	config := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
store: {driver: sqlite, path: %q, sync: %s}
localInstance: {enabled: false}
shutdownGrace: 1s
log: {level: error}
engine:
  lanes:
    - {name: main, maxInFlight: 16, retry: {maxAttempts: 20, backoff: 10ms, maxBackoff: 100ms}}
instances:
  - {id: fake, url: %q, capacity: 16}
`, filepath.Join(dir, "switchyard.db"), syncMode, inst.srv.URL+"/node")), 0o644))

	const crashes = 4
	var acked sync.Map // task id → struct{}
	var seq atomic.Int64
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var url string
	for round := 0; round <= crashes; round++ {
		var cmd *exec.Cmd
		cmd, url = startProcess(t, bin, config)
		if round == crashes {
			// The last run: no more load, no crash; let everything finish.
			t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
			break
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := client.New(url)
				for ctx.Err() == nil {
					n := seq.Add(1)
					var out struct{ SubmitTask struct{ ID string } }
					err := c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
						map[string]any{"in": map[string]any{"agentId": "agent-" + strconv.Itoa(int(n%5)),
							"action": map[string]any{"kind": "click", "selector": "css:#go"}, "idempotencyKey": "k" + strconv.FormatInt(n, 10)}}, &out)
					if err == nil && out.SubmitTask.ID != "" {
						acked.Store(out.SubmitTask.ID, struct{}{})
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+r.IntN(800)) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill(), "kill -9")
		_ = cmd.Wait()
		stop()
		wg.Wait()
	}

	// Every acknowledged task ends, in exactly one terminal state.
	c := client.New(url)
	ids := []string{}
	acked.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	require.Greater(t, len(ids), 50, "the load did real work")
	for _, id := range ids {
		requireSucceededAndRecorded(t, context.Background(), c, id, inst.count)
	}
	// Exactly one terminal event per task: replay the whole stored stream.
	ends := map[string]int{}
	var last struct{ Stats struct{ LastSeq int64 } }
	require.NoError(t, c.Do(context.Background(), `{ stats { lastSeq } }`, nil, &last))
	conn, err := c.Dial(context.Background(), client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	sub, err := conn.Subscribe(context.Background(), `subscription { taskEventFeed(after: 0, max: 5000, maxDelayMs: 0) { events lastSeq } }`, nil)
	require.NoError(t, err)
	for seen := int64(0); seen < last.Stats.LastSeq; {
		m, err := sub.Next(context.Background())
		require.NoError(t, err)
		var f struct {
			TaskEventFeed struct {
				Events  []map[string]any
				LastSeq int64
			}
		}
		require.NoError(t, json.Unmarshal(m.Data, &f))
		for _, e := range f.TaskEventFeed.Events {
			require.NotEqual(t, "LAGGED", e["kind"], "the stored stream has a gap: %v", e)
			if to, _ := e["to"].(string); e["kind"] == "STATE" && terminal(to) {
				ends[e["taskId"].(string)]++
			}
		}
		seen = f.TaskEventFeed.LastSeq
	}
	for _, id := range ids {
		require.Equal(t, 1, ends[id], "task %s has %d terminal events", id, ends[id])
	}
	t.Logf("%d acknowledged tasks over %d kill -9s: none lost, each ended once", len(ids), crashes)
}

// requireSucceededAndRecorded waits for the acknowledged task id to end,
// and requires that it succeeded and that every run of it the instance saw
// (runs) is a recorded attempt: nothing acknowledged is lost, nothing runs
// unrecorded.
func requireSucceededAndRecorded(t *testing.T, ctx context.Context, c *client.Client, id string, runs func(id string) int) {
	t.Helper()
	var out struct {
		Task *struct {
			State    string
			Attempts []struct{ Error *string }
		}
	}
	waitfor.CheckForWithin(t, 90*time.Second, func() error { // a failover under -race on a busy machine
		require.NoError(t, c.Do(ctx, `query($id: ID!) { task(id: $id) { state attempts { error } } }`, map[string]any{"id": id}, &out))
		require.NotNil(t, out.Task, "acknowledged task %s is lost", id)
		if !terminal(out.Task.State) {
			return fmt.Errorf("task %s is still %s", id, out.Task.State)
		}
		return nil
	})
	require.Equal(t, "SUCCEEDED", out.Task.State, "task %s", id)
	require.LessOrEqual(t, runs(id), len(out.Task.Attempts),
		"task %s ran %d times with %d recorded attempts", id, runs(id), len(out.Task.Attempts))
}

func terminal(state string) bool {
	switch state {
	case "SUCCEEDED", "FAILED", "CANCELLED", "REJECTED", "EXPIRED":
		return true
	}
	return false
}
