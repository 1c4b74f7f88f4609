package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// doneExec ends every attempt at once.
type doneExec struct{}

func (doneExec) Start(_ context.Context, run *engine.Run) { run.Finish(engine.Outcome{}) }

// lockedLog is a log output the test reads while the node writes it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A command the leader applied is answered even when the first write of
// its answer fails (the database dropped the leader's connections a moment):
// its caller gets the answer, not "no leader answered" once its time is out.
func TestAnAnswerWhoseWriteFailedIsWrittenAgain(t *testing.T) {
	schema := pgtest.Schema(t)
	cut := &pgtest.Cutter{}
	store, err := postgres.Open(context.Background(), postgres.Options{URL: pgtest.URL(t), Schema: schema, MaxConns: 6,
		PollInterval: 300 * time.Millisecond, ConfigurePool: cut.Configure})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	caller, err := postgres.Open(context.Background(), postgres.Options{URL: pgtest.URL(t), Schema: schema, MaxConns: 2,
		PollInterval: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = caller.Close() })

	logs := &lockedLog{}
	n, err := New(Options{Node: "node-1", Store: store,
		NewEngine: func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Store: store, Executor: doneExec{}, Events: events})
		},
		Lead: func(context.Context, *engine.Engine, func() error) (*Leadership, error) { return &Leadership{}, nil },
		// A long lease: the leader keeps it through the moment it is cut off.
		TTL: 30 * time.Second, RenewEvery: 300 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
		CallTimeout: 30 * time.Second,
		Logger:      hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})})
	require.NoError(t, err)
	applied, release := make(chan struct{}), make(chan struct{})
	n.handlers["test.hold"] = func(context.Context, *leader, json.RawMessage) (json.RawMessage, error) {
		close(applied)
		<-release
		return json.RawMessage(`{"ok":true}`), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, n.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		n.Stop(sctx)
		cancel()
	})
	waitfor.Eventually(t, "the node leads", func() bool { ok, _ := n.Leading(); return ok })

	id, err := caller.SubmitCommand(context.Background(), "node-2", "test.hold", json.RawMessage(`{}`))
	require.NoError(t, err)
	<-applied
	cut.Partition() // the answer's first write fails
	close(release)
	waitfor.Eventually(t, "the failed write is logged", func() bool { return strings.Contains(logs.String(), "completing a command") })
	cut.Heal()

	actx, acancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer acancel()
	raw, err := caller.AwaitCommand(actx, id)
	require.NoError(t, err, "the caller gets its answer; the log:\n%s", logs.String())
	require.JSONEq(t, `{"ok":{"ok":true}}`, string(raw), "the answer, with the handler's result")
}
