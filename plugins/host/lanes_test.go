package host_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
)

// A selection plugin in one lane cannot delay another lane: the engine
// ranks a submission outside its lock when the lane's policy is a plugin
// (doc/adr/0006-policy-calls-outside-the-lock.md). These tests run a real
// engine with two lanes; lane a's selection is a WebAssembly module, lane b
// keeps the built-ins.

// selectionModule assembles a selection plugin whose selection_rank runs
// body (locals: $x i64 = 1, $i i32 = 2), then calls switchyard.log once
// when logs is set, and answers rank 0 for every task.
//
//	type 0 () -> i32; 1 (i32) -> i64; 2 (i64) -> i32; 3 (i32, i32, i32) -> ()
//	func 0 = import switchyard.log; 1 abi_version; 2 arena = 64 KiB at 64 KiB;
//	3 selection_rank
func selectionModule(body [][]byte, logs bool) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sect(1, vec(
		[]byte{0x60, 0, 1, 0x7F},
		[]byte{0x60, 1, 0x7F, 1, 0x7E},
		[]byte{0x60, 1, 0x7E, 1, 0x7F},
		[]byte{0x60, 3, 0x7F, 0x7F, 0x7F, 0},
	))...)
	m = append(m, sect(2, vec(append(append(name("switchyard"), name("log")...), 0x00, 3)))...)
	m = append(m, sect(3, vec([]byte{0}, []byte{1}, []byte{2}))...)
	m = append(m, sect(5, vec([]byte{0x00, 2}))...)
	m = append(m, sect(7, vec(
		append(name("memory"), 0x02, 0),
		append(name("abi_version"), 0x00, 1),
		append(name("arena"), 0x00, 2),
		append(name("selection_rank"), 0x00, 3),
	))...)
	code := slices.Clone(body)
	if logs {
		code = append(code, bytes.Join([][]byte{i32c(1), i32c(0), i32c(4), {opCall, 0}}, nil))
	}
	// The ranks stay 0 (the arena is zeroed); the answer is the count.
	code = append(code, i32c(65536+8), []byte{opI32Load, 2, 0})
	noLocals := []byte{0}
	m = append(m, sect(10, vec(
		funcBody(noLocals, i32c(1)),
		funcBody(noLocals, i64c(65536<<32|65536)),
		funcBody([]byte{2, 1, 0x7E, 1, 0x7F}, code...),
	))...)
	seg := append([]byte{0}, i32c(0)...)
	seg = append(seg, opEnd)
	seg = append(seg, uleb(4)...)
	seg = append(seg, "rank"...)
	m = append(m, sect(11, vec(seg))...)
	return m
}

// denseLoop is n iterations of 2,000 dependent multiplications.
func denseLoop(n int32) [][]byte {
	const x, i = 1, 2
	return [][]byte{i32c(n), {opLocalSet, i, opLoop, 0x40},
		repeat(2_000, opLocalGet, x, opLocalGet, x, opI64Mul, opLocalSet, x),
		{opLocalGet, i}, i32c(1), {opI32Sub, opLocalTee, i, opBrIf, 0, opEnd}}
}

// startsRecorder records when each task's attempt started.
type startsRecorder struct {
	mu     sync.Mutex
	at     map[string]time.Time
	notify chan string
}

func newStarts() *startsRecorder {
	return &startsRecorder{at: map[string]time.Time{}, notify: make(chan string, 1<<16)}
}

func (x *startsRecorder) Start(_ context.Context, run *engine.Run) {
	x.mu.Lock()
	x.at[run.TaskID()] = time.Now()
	x.mu.Unlock()
	select {
	case x.notify <- run.TaskID():
	default:
	}
	run.Finish(engine.Outcome{})
}

func (x *startsRecorder) started(id string) (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	at, ok := x.at[id]
	return at, ok
}

func twoLaneEngine(tb testing.TB, x engine.Executor) *engine.Engine {
	tb.Helper()
	cfg := engine.Config{
		MaxQueued: 1 << 20, MaxQueuedPerAgent: 1 << 20, MaxQueuedPerSession: 1 << 20,
		Lanes: []engine.LaneConfig{{Name: "a", MaxInFlight: 64, MaxQueued: 1 << 20}, {Name: "b", MaxInFlight: 64, MaxQueued: 1 << 20}},
	}
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{MaxEnded: 10_000}), Executor: x})
	require.NoError(tb, err)
	require.NoError(tb, e.Start(context.Background()))
	tb.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

func laneSpec(lane, agent string) engine.TaskSpec {
	return engine.TaskSpec{Lane: lane, AgentID: agent, Action: &engine.Action{Kind: "click"}}
}

func TestSelectionPluginInOneLaneDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	// A decision over one task (the load's smoke decision ranks eight) logs
	// in a loop until it is stopped: it stays in the guest, reaching the
	// host (where a collection can stop it) at every line.
	hold := [][]byte{i32c(65536 + 8), {opI32Load, 2, 0}, i32c(1), {opI32Eq, 0x04, 0x40, opLoop, 0x40},
		i32c(1), i32c(0), i32c(4), {opCall, 0, opBr, 0, opEnd, opEnd}}
	rt := newRuntime(t, host.Config{Deadline: 10 * time.Minute, DecisionFuel: 1 << 50, NoFileCache: true})
	p, err := rt.Load(context.Background(), "held", selectionModule(hold, false), nil)
	require.NoError(t, err)
	w, err := p.Selection(priority.Selection{})
	require.NoError(t, err)
	t.Cleanup(func() { host.AbandonRunning(p) })

	x := newStarts()
	e := twoLaneEngine(t, x)
	require.NoError(t, e.SetSelection("a", "held", w))

	aDone := make(chan error, 1)
	var aID atomic.Value
	go func() {
		task, err := e.Submit(context.Background(), laneSpec("a", "alice"))
		if err == nil {
			aID.Store(task.ID)
		}
		aDone <- err
	}()
	waitfor.Eventually(t, "lane a's decision runs", func() bool { return host.Running(p) })

	// Lane a's decision is held in the guest, before its deadline. Lane b
	// admits and dispatches regardless, one task after another.
	for i := range 20 {
		task, err := e.Submit(context.Background(), laneSpec("b", fmt.Sprintf("bob-%d", i%3)))
		require.NoError(t, err)
		waitfor.Eventually(t, "lane b's task starts", func() bool { _, ok := x.started(task.ID); return ok })
	}
	select {
	case <-aDone:
		t.Fatal("lane a's submission answered while its decision was held")
	default:
	}
	require.True(t, host.Running(p), "lane a's decision still runs")
	require.Equal(t, 1, e.Stats(context.Background()).Pending, "only lane a's task waits, for its rank")

	host.AbandonRunning(p) // as its deadline would: the fallback ranks
	require.NoError(t, <-aDone)
	id := aID.Load().(string)
	waitfor.Eventually(t, "lane a's task starts", func() bool { _, ok := x.started(id); return ok })
	require.Equal(t, uint64(1), p.Stats().Calls, "one decision, for lane a's one submission")
	require.Equal(t, uint64(1), p.Stats().Faults[host.FaultDeadline], "ended in its host call as the deadline ends it")
}

// TestRunawaySelectionBoundsItsOwnLane: a selection plugin that never
// answers (an endless loop over one task) costs its own lane's submissions
// one stopped decision each, until the breaker takes it out; every
// submission answers, ranked by the fallback, and its task runs. Checked
// by counts (decisions asked of the plugin), not by time.
func TestRunawaySelectionBoundsItsOwnLane(t *testing.T) {
	t.Parallel()
	spin := [][]byte{i32c(65536 + 8), {opI32Load, 2, 0}, i32c(1), {opI32Eq, 0x04, 0x40, opLoop, 0x40, opBr, 0, opEnd, opEnd}}
	rt := newRuntime(t, host.Config{Deadline: 10 * time.Millisecond, NoFileCache: true})
	p, err := rt.Load(context.Background(), "spin", selectionModule(spin, false), nil)
	require.NoError(t, err)
	w, err := p.Selection(priority.Selection{})
	require.NoError(t, err)
	x := newStarts()
	e := twoLaneEngine(t, x)
	require.NoError(t, e.SetSelection("a", "spin", w))

	for i := range 20 {
		// Each task's selection asks the module, not the fallback that
		// answers while its faulted instance is rebuilt.
		waitfor.Eventually(t, "the instance is rebuilt", func() bool { return host.Ready(p) })
		task, err := e.Submit(context.Background(), laneSpec("a", fmt.Sprintf("alice-%d", i%3)))
		require.NoError(t, err)
		waitfor.Eventually(t, "lane a's task starts", func() bool { _, ok := x.started(task.ID); return ok })
	}
	st := p.Stats()
	require.Equal(t, host.StateQuarantined, st.State, "%+v", st)
	require.Equal(t, uint64(1), st.Quarantines)
	require.LessOrEqual(t, st.Observed, uint64(rt.Config().BreakerThreshold), "the breaker took it out within its threshold")
	require.Equal(t, st.Observed, st.FaultTotal(), "every decision it was asked faulted: fuel or deadline")
	require.Equal(t, st.FaultTotal(), st.Faults[host.FaultBudget]+st.Faults[host.FaultDeadline], "%+v", st)
}

// forcedInline runs a plugin's selection under the engine lock, as every
// policy did before policies that are not inline moved outside it: the
// benchmark's point of comparison.
type forcedInline struct{ policy.Selection }

func (forcedInline) Inline() bool { return true }

// BenchmarkUnrelatedLane measures lane b's submit→dispatch latency (p50,
// p99, p99.9, max) while lane a's submitters run a slow but legal selection plugin
// (about a quarter of the decision fuel every decision), against the same
// with the built-in selection in lane a, and with the plugin called under
// the engine lock. Bar (issue 15): lane b's p99 within 2× of the baseline.
//
//	go test -run '^$' -bench UnrelatedLane -benchtime 2000x ./plugins/host/
func BenchmarkUnrelatedLane(b *testing.B) {
	slow := selectionModule(denseLoop(int32(host.DefaultDecisionFuel/4/(4*2_000+8))), false)
	for _, mode := range []string{"builtin", "plugin", "plugin-under-lock"} {
		b.Run(mode, func(b *testing.B) {
			x := newStarts()
			e := twoLaneEngine(b, x)
			if mode != "builtin" {
				rt := newRuntime(b, host.Config{})
				p, err := rt.Load(context.Background(), "slow", slow, nil)
				require.NoError(b, err)
				w, err := p.Selection(priority.Selection{})
				require.NoError(b, err)
				var sel policy.Selection = w
				if mode == "plugin-under-lock" {
					sel = forcedInline{w}
				}
				require.NoError(b, e.SetSelection("a", "slow", sel))
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for s := range 2 { // lane a's submitters
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if e.Stats(context.Background()).Pending > 1_000 { // a steady load, not an ever-growing backlog
							time.Sleep(100 * time.Microsecond)
							continue
						}
						if _, err := e.Submit(context.Background(), laneSpec("a", fmt.Sprintf("a-%d-%d", s, i%8))); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				task, err := e.Submit(context.Background(), laneSpec("b", fmt.Sprintf("b-%d", i%8)))
				require.NoError(b, err)
				for {
					if at, ok := x.started(task.ID); ok {
						lat = append(lat, at.Sub(start))
						break
					}
					<-x.notify
				}
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
			b.ReportMetric(float64(lat[len(lat)*999/1000])/1e3, "p99.9-µs")
			b.ReportMetric(float64(lat[len(lat)-1])/1e3, "max-µs")
		})
	}
}
