package host_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

// The hostile-module suite: fairness plugins written straight in the
// binary format, each built to cost the host as much as its shape allows.
// A module's fairness_pick is given as code; the rest is fixed:
//
//	type 0 () -> i32; 1 (i32) -> i64; 2 (i64, i64, i32, i32) -> i32;
//	     3 (i32, i32, i32) -> (); 4 (i32) -> i32
//	func 0 = import switchyard.log (type 3)
//	func 1 abi_version = 1; func 2 arena = 64 KiB at 64 KiB;
//	func 3 fairness_pick (locals $x i64, $i i32 after the 4 params);
//	func 4 helper (type 4, the given code; default: return the argument)
//	memory 2 pages, unbounded (the host caps it); a data segment at 0 with
//	text that must be sanitised before it reaches a log (hostileModuleMem:
//	another size and other data).

// op codes used below.
const (
	opUnreachable = 0x00
	opLoop        = 0x03
	opEnd         = 0x0B
	opBr          = 0x0C
	opBrIf        = 0x0D
	opCall        = 0x10
	opDrop        = 0x1A
	opLocalGet    = 0x20
	opLocalSet    = 0x21
	opLocalTee    = 0x22
	opI32Load     = 0x28
	opMemoryGrow  = 0x40
	opI32Const    = 0x41
	opI64Const    = 0x42
	opI32Eqz      = 0x45
	opI32Eq       = 0x46
	opI32Add      = 0x6A
	opI32Sub      = 0x6B
	opI32Mul      = 0x6C
	opI32And      = 0x71
	opI32Xor      = 0x73
	opI64Add      = 0x7C
	opI64Mul      = 0x7E
	opI64DivU     = 0x80
)

// Local indices in fairness_pick.
const (
	localX = 4 // i64
	localI = 5 // i32
)

// logText is the data segment: control bytes, an ANSI escape, NUL and
// invalid UTF-8.
var logText = []byte("plugin says \x00\x1b[31mred\x1b[0m\r\nforged line\xff\xfe end")

func leb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func uleb(v uint32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func i32c(v int32) []byte { return append([]byte{opI32Const}, leb(int64(v))...) }
func i64c(v int64) []byte { return append([]byte{opI64Const}, leb(v)...) }

func sect(id byte, payload []byte) []byte {
	return append(append([]byte{id}, uleb(uint32(len(payload)))...), payload...)
}

func vec(items ...[]byte) []byte {
	out := uleb(uint32(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func name(s string) []byte { return append(uleb(uint32(len(s))), s...) }

func funcBody(locals []byte, code ...[]byte) []byte {
	b := append([]byte(nil), locals...)
	for _, c := range code {
		b = append(b, c...)
	}
	b = append(b, opEnd)
	return append(uleb(uint32(len(b))), b...)
}

// hostileModule assembles a fairness plugin.
func hostileModule(pick [][]byte, helper [][]byte) []byte {
	return hostileModuleInit(pick, helper, nil, "")
}

// hostileModuleInit assembles a fairness plugin with an initialisation:
// init, the body of a function () -> () (func 5, type 5), exported as
// _initialize when as is "_initialize", or made the module's start
// function when as is "start". With as "", init is ignored.
func hostileModuleInit(pick, helper, init [][]byte, as string) []byte {
	return hostileModuleMem(pick, helper, init, as, 2, []segment{{0, logText}})
}

// segment is an active data segment: data at offset at.
type segment struct {
	at   int32
	data []byte
}

// hostileModuleMem assembles a fairness plugin as hostileModuleInit does,
// with a memory of pages pages (at least 2: the arena is the second) that
// the segments initialise.
func hostileModuleMem(pick, helper, init [][]byte, as string, pages uint32, segs []segment) []byte {
	if helper == nil {
		helper = [][]byte{{opLocalGet, 0}}
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sect(1, vec(
		[]byte{0x60, 0, 1, 0x7F},
		[]byte{0x60, 1, 0x7F, 1, 0x7E},
		[]byte{0x60, 4, 0x7E, 0x7E, 0x7F, 0x7F, 1, 0x7F},
		[]byte{0x60, 3, 0x7F, 0x7F, 0x7F, 0},
		[]byte{0x60, 1, 0x7F, 1, 0x7F},
		[]byte{0x60, 0, 0},
	))...)
	m = append(m, sect(2, vec(append(append(name("switchyard"), name("log")...), 0x00, 3)))...)
	funcs := [][]byte{{0}, {1}, {2}, {4}}
	if as != "" {
		funcs = append(funcs, []byte{5})
	}
	m = append(m, sect(3, vec(funcs...))...)
	m = append(m, sect(5, vec(append([]byte{0x00}, uleb(pages)...)))...)
	exports := [][]byte{
		append(name("memory"), 0x02, 0),
		append(name("abi_version"), 0x00, 1),
		append(name("arena"), 0x00, 2),
		append(name("fairness_pick"), 0x00, 3),
	}
	if as == "_initialize" {
		exports = append(exports, append(name("_initialize"), 0x00, 5))
	}
	m = append(m, sect(7, vec(exports...))...)
	if as == "start" {
		m = append(m, sect(8, uleb(5))...)
	}
	noLocals := []byte{0}
	// Behave on the smoke decision's 8 candidates: return 0 at once.
	smoke := bytes.Join([][]byte{i32c(65536 + 8), {opI32Load, 2, 0}, i32c(9), {0x49, 0x04, 0x40}, i32c(0), {0x0F, opEnd}}, nil)
	pick = append([][]byte{smoke}, pick...)
	bodies := [][]byte{
		funcBody(noLocals, i32c(1)),
		funcBody(noLocals, i64c(65536<<32|65536)),
		funcBody([]byte{2, 1, 0x7E, 1, 0x7F}, pick...),
		funcBody(noLocals, helper...),
	}
	if as != "" {
		bodies = append(bodies, funcBody([]byte{1, 1, 0x7E}, init...)) // one i64 local
	}
	m = append(m, sect(10, vec(bodies...))...)
	data := make([][]byte, len(segs))
	for i, sg := range segs {
		d := append([]byte{0}, i32c(sg.at)...)
		d = append(d, opEnd)
		d = append(d, uleb(uint32(len(sg.data)))...)
		data[i] = append(d, sg.data...)
	}
	m = append(m, sect(11, vec(data...))...)
	return m
}

func repeat(n int, code ...byte) []byte { return bytes.Repeat(code, n) }

// answer is the end of a well-behaved pick: no opinion (the engine's
// native order decides), which is a valid answer.
var answer = i32c(0)

// forever wraps body in an endless loop.
func forever(body ...[]byte) [][]byte {
	out := [][]byte{{opLoop, 0x40}}
	out = append(out, body...)
	return append(out, []byte{opBr, 0, opEnd}, answer)
}

// times wraps body in a loop that runs n times.
func times(n int32, body ...[]byte) [][]byte {
	out := [][]byte{i32c(n), {opLocalSet, localI, opLoop, 0x40}}
	out = append(out, body...)
	return append(out, []byte{opLocalGet, localI}, i32c(1), []byte{opI32Sub, opLocalTee, localI, opBrIf, 0, opEnd}, answer)
}

var (
	denseBody = repeat(20_000, opLocalGet, localX, opLocalGet, localX, opI64Mul, opLocalSet, localX)
	divBody   = bytes.Join([][]byte{repeat(2_000, opLocalGet, localX), bytes.Repeat(append(append(i64c(7), opI64DivU), append(i64c(1<<40), opI64Add)...), 2_000), {opLocalSet, localX}}, nil)
	// chase loads a word whose address depends on the previous load,
	// scattered over 8 MiB: every load misses the caches near the core.
	chaseBody = bytes.Join([][]byte{{opLocalGet, localI}, i32c(-1640531535), {opI32Mul, opLocalGet, localI, opI32Xor}, i32c(8<<20 - 4), {opI32And, opI32Load, 2, 0, opLocalGet, localI, opI32Add}, i32c(0x9E37), {opI32Add, opLocalSet, localI}}, nil)
	grow      = bytes.Join([][]byte{i32c(126), {opMemoryGrow, 0, opDrop}}, nil)
	logCall   = bytes.Join([][]byte{i32c(1), i32c(0), i32c(int32(len(logText))), {opCall, 0}}, nil)
)

// chasePages is the pointer chase's memory: the host's default cap
// (Config.MemoryLimitPages), all of it declared at the start.
const chasePages = 128

// chaseUnroll is how many dependent loads one iteration of the pointer
// chase's loop makes: local.get, chaseUnroll loads of 2 units each,
// local.set and br, so about 2 units a load, the least a load can weigh.
const chaseUnroll = 1000

// chaseSegments is the pointer chase's data: every 4-byte word of its
// memory but those of the arena (the second page, which the host writes at
// each decision) holds the offset of the next word of a single cycle
// through all of them, in an order drawn at random with a fixed seed, so
// that each load's address is the previous load's value and the next is
// anywhere in the 8 MiB.
var chaseSegments = sync.OnceValue(func() []segment {
	const size, arenaAt, arenaEnd = chasePages << 16, 64 << 10, 128 << 10
	order := make([]uint32, 0, (size-(arenaEnd-arenaAt))/4)
	for a := uint32(0); a < size; a += 4 {
		if a < arenaAt || a >= arenaEnd {
			order = append(order, a)
		}
	}
	r := rand.New(rand.NewPCG(15, 10))
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	mem := make([]byte, size)
	for i, a := range order {
		binary.LittleEndian.PutUint32(mem[a:], order[(i+1)%len(order)])
	}
	return []segment{{0, mem[:arenaAt]}, {arenaEnd, mem[arenaEnd:]}}
})

// pointerChase is the pointer chase's pick: p (the local $i) starts at 0,
// a word of the cycle, and is replaced by the word it points at, forever.
func pointerChase() [][]byte {
	return forever([]byte{opLocalGet, localI}, repeat(chaseUnroll, opI32Load, 2, 0), []byte{opLocalSet, localI})
}

// fastStart is ten iterations of denseBody (800,000 units, a fraction of
// a millisecond), leaving nothing on the stack.
func fastStart() [][]byte {
	warm := times(10, denseBody)
	return warm[:len(warm)-1] // without its answer
}

// hostileCase is one shape of hostile module.
type hostileCase struct {
	name   string
	pick   [][]byte
	helper [][]byte
	want   host.FaultKind // 0: legal, never faults
	pages  uint32         // the memory's initial size; 0: 2 pages and the log text
	data   func() []segment
}

// wasm assembles the case's module.
func (tc hostileCase) wasm() []byte {
	if tc.pages == 0 {
		return hostileModule(tc.pick, tc.helper)
	}
	return hostileModuleMem(tc.pick, tc.helper, nil, "", tc.pages, tc.data())
}

func hostileCases() []hostileCase {
	return []hostileCase{
		// 20,000 dependent multiplications per loop iteration: under a
		// budget of loop iterations this ran for minutes.
		{name: "dense-loop", pick: forever(denseBody), want: host.FaultBudget},
		{name: "divisions", pick: forever(divBody), want: host.FaultBudget},
		{name: "cache-misses", pick: append([][]byte{grow}, forever(chaseBody, chaseBody, chaseBody, chaseBody)...), want: host.FaultBudget},
		// Recursion without a loop anywhere: each call pays at its entry.
		// The tightest chase: a random cycle through the whole memory,
		// brought in the module, about 2 units a load (the suite's chase
		// above spends about 13 on computing each address).
		{name: "pointer-chase", pick: pointerChase(), pages: chasePages, data: chaseSegments, want: host.FaultBudget},
		// The chase after fast code, which sizes the tanks for its pace:
		// a tank that lasts 250 µs of multiplications lasts a hundred
		// times longer of chasing, and only the watchdog's reading of
		// the thread's CPU clock ends it between two refills.
		{name: "fast-then-chase", pick: append(fastStart(), pointerChase()...), pages: chasePages, data: chaseSegments, want: host.FaultBudget},
		{name: "deep-recursion", pick: [][]byte{i32c(0), {opCall, 4, opDrop}, answer},
			helper: [][]byte{{opLocalGet, 0}, i32c(1), {opI32Add, opCall, 4}}, want: host.FaultBudget},
		{name: "log-flood", pick: forever(logCall), want: host.FaultBudget},
		{name: "memory-to-the-cap", pick: forever(i32c(1), []byte{opMemoryGrow, 0, opDrop}), want: host.FaultBudget},
		{name: "trap", pick: [][]byte{{opUnreachable}, answer}, want: host.FaultTrap},
		{name: "garbage-answer", pick: [][]byte{i32c(1000)}, want: host.FaultInvalid},
		// Legal: as much work as the budget allows, short of it, every time.
		{name: "slow-but-legal", pick: times(int32(host.DefaultDecisionFuel*9/10/(4*20_000+8)), denseBody)},
	}
}

// logCounter counts the lines a runtime's logger receives and keeps them.
type logCounter struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

// TestHostileModules runs each hostile shape under the default budget and
// checks, by counts rather than by time: the fault and its kind, that no
// decision burnt more than the budget (plus at most one function's
// straight-line code, and what a pending host call charges), that the
// breaker quarantined the plugin within its threshold, and that another
// plugin of the same runtime kept deciding meanwhile. The wall time of the
// worst decision is checked only against a bound a busy machine cannot miss
// (the figures are in BenchmarkHostile).
func TestHostileModules(t *testing.T) {
	t.Parallel()
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ev events
			logs := &logCounter{}
			// The shared cache: the healthy built-in beside it was compiled
			// once by TestMain (nine compiles of it took minutes under -race).
			cfg := host.Config{OnEvent: ev.add, Logger: slog.New(logs)}
			if tc.want != 0 { // the defaults: a fault may be of either kind
				cfg.Deadline, cfg.DecisionCPU = host.DefaultDeadline, host.DefaultDecisionCPU
			}
			rt := newRuntime(t, cfg)
			budget := rt.Config().DecisionFuel
			// Each behaves on the load's smoke decision (8 candidates) and
			// shows its shape only on more, as a data-dependent path would.
			wasm := tc.wasm()
			require.LessOrEqual(t, len(wasm), manager.DefaultMaxWasmBytes, "a module the server accepts")
			require.LessOrEqual(t, max(tc.pages, 2), rt.Config().MemoryLimitPages, "a memory the host allows")
			p, err := rt.Load(context.Background(), tc.name, wasm, nil)
			require.NoError(t, err)
			require.Zero(t, p.Stats().Observed)
			require.Zero(t, p.Stats().LatencyP99, "no percentiles before the first decision")
			w, err := p.Fairness(reverse{})
			require.NoError(t, err)

			// A healthy plugin in the same runtime, deciding concurrently.
			gw, err := loadBuiltin(t, rt, policy.SlotFairness).Fairness(&fairshare.Fairness{})
			require.NoError(t, err)
			var goodN sync.WaitGroup
			var good atomic.Int64
			stop := make(chan struct{})
			goodN.Go(func() {
				cands := host.SyntheticCandidates(64, 3)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if gw.Pick(pickCtx(), cands, make([]uint32, 4)) == 4 {
						good.Add(1)
					}
				}
			})
			waitfor.Eventually(t, "the healthy plugin decides", func() bool { return good.Load() > 0 })

			cands := host.SyntheticCandidates(16, 1)
			var worst time.Duration
			decisions := 0
			for range 10 {
				// A decision made while the faulted instance is rebuilt
				// falls back at once; this suite asks the module itself.
				waitfor.Eventually(t, "the instance is rebuilt", func() bool { return host.Ready(p) })
				start := time.Now()
				n := w.Pick(pickCtx(), cands, make([]uint32, 4))
				require.True(t, n == 4 || (tc.want == 0 && n == 0), "the fallback's 4 picks, or the legal module's none")
				worst = max(worst, time.Since(start))
				decisions++
				if d, _ := p.Disabled(); d {
					break
				}
			}
			after := good.Load()
			waitfor.Eventually(t, "the healthy plugin keeps deciding", func() bool { return good.Load() > after })
			close(stop)
			goodN.Wait()

			st := p.Stats()
			require.Equal(t, uint64(decisions), st.Observed, "the latency figures cover the decisions asked, not the load's smoke test")
			require.True(t, st.LatencyP50 <= st.LatencyP99 && st.LatencyP99 <= st.LatencyMax, "%+v", st)
			require.LessOrEqual(t, st.FuelMax, uint64(budget+host.LogFuel+100_000), "no decision burnt much more than its budget")
			require.Less(t, worst, 2*time.Second, "a loose bound: the tight ones are fuel and CPU time, and the benchmark's figures")
			if tc.want == 0 {
				require.Zero(t, st.FaultTotal(), "%+v", st)
				require.Equal(t, host.StateActive, st.State)
				require.Greater(t, st.FuelMax, uint64(budget/2), "it does use most of its budget")
				return
			}
			require.Equal(t, st.FaultTotal(), st.Faults[tc.want]+st.Faults[host.FaultDeadline], "%+v", st)
			require.Equal(t, host.StateQuarantined, st.State, "%+v", st)
			require.LessOrEqual(t, decisions, rt.Config().BreakerThreshold, "quarantined within its threshold")
			require.Equal(t, uint64(1), st.Quarantines)
			require.Equal(t, uint64(decisions), st.Fallbacks)
			ev.mu.Lock()
			for _, e := range ev.all {
				require.NotContains(t, e.Reason, "\n", "a reason is one line (it ends up in task reasons and event streams)")
				require.NotContains(t, e.Reason, "\t")
			}
			ev.mu.Unlock()
			if tc.name == "log-flood" {
				require.Positive(t, st.LogDropped)
				waitfor.Eventually(t, "the queued lines reach the logger", func() bool { // written by the runtime's writer, not the decision
					logs.mu.Lock()
					defer logs.mu.Unlock()
					return len(logs.lines) > 0
				})
				logs.mu.Lock()
				defer logs.mu.Unlock()
				require.LessOrEqual(t, uint64(len(logs.lines)), st.LogLines+10)
				for _, l := range logs.lines {
					if !strings.Contains(l, "plugin says") {
						continue
					}
					require.NotContains(t, l, "\x00")
					require.NotContains(t, l, "\x1b")
					require.NotContains(t, l, "\n")
					require.LessOrEqual(t, len(l), 1024)
				}
			}
		})
	}
}

// TestDeadlineAbandonsAndQuarantinesWithBackoff gives an endless loop fuel
// for minutes, so that only the wall-clock deadline stops it in time: each
// deadline fault quarantines the plugin at once, for twice as long as the
// last time up to the cap, the plugin comes back on probation by itself,
// and good decisions on probation reset the backoff.
//
// Not parallel, and with the garbage collector off: the watchdog is a
// goroutine, and a collection that stops the world waits for the guest,
// which cannot be preempted, so that then only fuel ends the decision.
func TestDeadlineAbandonsAndQuarantinesWithBackoff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var ev events
	// A deadline a good decision meets even when a busy machine preempts
	// the test for a while: probation's good decisions must not fault.
	rt := newRuntime(t, host.Config{OnEvent: ev.add, DecisionFuel: 1 << 38, Deadline: 50 * time.Millisecond,
		QuarantineBase: 100 * time.Millisecond, QuarantineMax: 200 * time.Millisecond, Probation: 2})
	p, err := rt.Load(context.Background(), "endless", hostileModule(forever(denseBody), nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	bad, good := host.SyntheticCandidates(16, 1), host.SyntheticCandidates(8, 1)
	picks := make([]uint32, 4)

	quarantinedFor := func(d time.Duration) {
		t.Helper()
		st := p.Stats()
		require.Equal(t, host.StateQuarantined, st.State, "%+v", st)
		require.Contains(t, st.Reason, "quarantined for "+d.String())
		require.Contains(t, st.Reason, "deadline")
	}
	require.Equal(t, 4, w.Pick(pickCtx(), bad, picks))
	require.Equal(t, []uint32{15, 14, 13, 12}, picks, "the fallback decides the abandoned decision")
	require.Equal(t, uint64(1), p.Stats().Faults[host.FaultDeadline])
	quarantinedFor(100 * time.Millisecond)

	for i, want := range []time.Duration{200 * time.Millisecond, 200 * time.Millisecond} { // doubled, then capped
		waitfor.Eventually(t, "the quarantine ends and the plugin is asked again", func() bool {
			w.Pick(pickCtx(), bad, picks)
			return p.Stats().Faults[host.FaultDeadline] == uint64(i+2)
		})
		quarantinedFor(want)
	}
	require.Equal(t, uint64(3), p.Stats().Quarantines)

	// Probation passed with good decisions: the next quarantine is short
	// again.
	waitfor.Eventually(t, "the plugin is on probation", func() bool {
		w.Pick(pickCtx(), good, picks)
		return p.Stats().State == host.StateProbation
	})
	w.Pick(pickCtx(), good, picks)
	require.Equal(t, host.StateActive, p.Stats().State)
	w.Pick(pickCtx(), bad, picks)
	quarantinedFor(100 * time.Millisecond)

	var kinds []host.EventKind
	for _, k := range ev.kinds() {
		if k != host.EventFault {
			kinds = append(kinds, k)
		}
	}
	require.Equal(t, []host.EventKind{host.EventQuarantined, host.EventEnabled, host.EventQuarantined, host.EventEnabled,
		host.EventQuarantined, host.EventEnabled, host.EventQuarantined}, kinds)
}

// blockedLog is a logger whose every write waits until the test ends: a
// full pipe, a stalled collector.
type blockedLog struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockedLog(t *testing.T) *blockedLog {
	l := &blockedLog{entered: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { l.once.Do(func() { close(l.release) }) })
	return l
}

func (l *blockedLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *blockedLog) Handle(context.Context, slog.Record) error {
	select {
	case l.entered <- struct{}{}:
	default:
	}
	<-l.release
	return nil
}
func (l *blockedLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *blockedLog) WithGroup(string) slog.Handler      { return l }

// TestHostCallsAreBounded: a decision never waits inside a host call. With
// the logger blocked, a plugin that logs at every decision goes on deciding
// (its lines queue, then are dropped and counted), and a guest looping in
// its log calls is stopped at its deadline inside the host call — which
// the watchdog alone, acting at metered points, could not do while a call
// waited in the host.
func TestHostCallsAreBounded(t *testing.T) {
	t.Parallel()
	logs := newBlockedLog(t)
	rt := newRuntime(t, host.Config{Logger: slog.New(logs), LogLines: 1 << 20, NoFileCache: true})

	// One line, then no opinion, every decision.
	p, err := rt.Load(context.Background(), "chatty", hostileModule([][]byte{logCall, answer}, nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	cands := host.SyntheticCandidates(16, 1)
	for range 400 {
		require.Zero(t, w.Pick(pickCtx(), cands, make([]uint32, 4)), "the plugin's own answer, not the fallback's")
	}
	<-logs.entered // the writer is stuck in the logger
	st := p.Stats()
	require.Zero(t, st.FaultTotal(), "%+v", st)
	require.Equal(t, uint64(400), st.LogLines+st.LogDropped)
	require.Positive(t, st.LogDropped, "lines the blocked logger cannot take are dropped")

	// Log in a loop with fuel for minutes: only the deadline ends it, in
	// the host call.
	rt2 := newRuntime(t, host.Config{Logger: slog.New(newBlockedLog(t)), LogLines: 1 << 20, DecisionFuel: 1 << 50,
		Deadline: 20 * time.Millisecond, NoFileCache: true})
	p2, err := rt2.Load(context.Background(), "log-loop", hostileModule(forever(logCall), nil), nil)
	require.NoError(t, err)
	w2, err := p2.Fairness(reverse{})
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() { done <- w2.Pick(pickCtx(), cands, make([]uint32, 4)) }()
	select {
	case n := <-done:
		require.Equal(t, 4, n, "the fallback decides")
	case <-time.After(time.Minute):
		t.Fatal("the decision was not stopped in its host call")
	}
	st = p2.Stats()
	require.Equal(t, uint64(1), st.Faults[host.FaultDeadline], "%+v", st)
	require.Equal(t, host.StateQuarantined, st.State)
}

// TestRecursionEndsAtItsDepth: a recursion without a base case ends at the
// depth bound, a fuel fault that says so, long before its fuel would end it
// (it used to run hundreds of thousands of frames deep).
func TestRecursionEndsAtItsDepth(t *testing.T) {
	t.Parallel()
	var ev events
	rt := newRuntime(t, host.Config{OnEvent: ev.add, NoFileCache: true})
	var deep hostileCase
	for _, tc := range hostileCases() {
		if tc.name == "deep-recursion" {
			deep = tc
		}
	}
	p, err := rt.Load(context.Background(), deep.name, hostileModule(deep.pick, deep.helper), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	require.Equal(t, 4, w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4)), "the fallback decides")
	st := p.Stats()
	require.Equal(t, uint64(1), st.Faults[host.FaultBudget], "%+v", st)
	reasons := ev.faultReasons()
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], "nested more than 10000 deep")
}
