package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
)

// TestABareCoreDecidesAsTheEngineDoes drives the decision core alone
// (engine.Core) and a synchronous engine with the same random operations —
// submissions with sessions, priorities, deadlines, dependencies and
// idempotency keys; attempts ending well,
// transiently or for good; time passing over backoffs, timeouts and
// deadlines — and requires the same event stream from both.
func TestABareCoreDecidesAsTheEngineDoes(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			retry := engine.RetryPolicy{MaxAttempts: 3, Backoff: 40 * time.Millisecond, Multiplier: 2, MaxBackoff: time.Second}
			cfg := engine.Config{AgentMaxInFlight: 2, Lanes: []engine.LaneConfig{
				{Name: "main", MaxInFlight: 3, Retry: retry}, {Name: "team", MaxInFlight: 2, Retry: retry}}}

			h := enginetest.New(t, &cfg)

			clk := clock.NewFake(enginetest.Epoch)
			core, err := engine.NewCore(cfg, clk, 1)
			if err != nil {
				t.Fatal(err)
			}
			var coreEvents []engine.Event
			running := map[string]*engine.Run{}
			// settle is the Engine's part after an operation: a round of
			// dispatch, the attempts handed over (the enginetest executor
			// reports no start), the changes taken.
			settle := func() {
				for _, r := range core.Dispatch() {
					running[r.TaskID()] = r
				}
				coreEvents = append(coreEvents, core.Take().Events...)
			}
			settle()
			advance := func(d time.Duration) {
				h.Clock.Advance(d)
				to := clk.Now().Add(d)
				for n, ok := 0, true; ok; n++ {
					var next time.Time
					if next, ok = core.Next(); !ok || next.After(to) {
						break
					}
					if n == 10_000 {
						t.Fatalf("the core's timer at %s stays due after RunDue", next)
					}
					clk.Set(next)
					core.RunDue()
					settle()
				}
				clk.Set(to)
			}

			r := rand.New(rand.NewPCG(seed, 18))
			agents := []string{"a", "b", "c"}
			var ids []string // submitted, for dependencies
			for step := range 400 {
				switch op := r.IntN(10); {
				case op < 4:
					b := enginetest.Spec(agents[r.IntN(3)]).Priority(engine.Priority(r.IntN(4))).Lane([]string{"main", "team"}[r.IntN(2)])
					if r.IntN(3) == 0 {
						b.Session(fmt.Sprint("s", r.IntN(3)))
					}
					if r.IntN(4) == 0 {
						b.Deadline(clk.Now().Add(time.Duration(1+r.IntN(300)) * time.Millisecond))
					}
					if len(ids) > 0 && r.IntN(4) == 0 {
						b.DependsOn(ids[len(ids)-1-r.IntN(min(len(ids), 5))])
					}
					if r.IntN(6) == 0 {
						b.Idempotency(fmt.Sprint("k", r.IntN(4)))
					}
					if r.IntN(5) == 0 {
						b.Timeout(time.Duration(20+r.IntN(100)) * time.Millisecond)
					}
					spec := b.Obj()
					et, eerr := h.Engine.Submit(t.Context(), spec)
					ct, cerr := core.Submit(spec)
					if (eerr == nil) != (cerr == nil) || (et == nil) != (ct == nil) || et != nil && (et.ID != ct.ID || et.State != ct.State) {
						t.Fatalf("step %d: the engine answered %v, %v; the core %v, %v", step, et, eerr, ct, cerr)
					}
					if et != nil {
						ids = append(ids, et.ID)
					}
					settle()
				case op < 8:
					live := h.Exec.Running()
					if len(live) == 0 {
						continue
					}
					id := live[r.IntN(len(live))]
					var o engine.Outcome
					switch r.IntN(4) {
					case 0:
						o.Err = engine.Transient(errors.New("flaky"))
					case 1:
						o.Err = engine.Permanent(errors.New("broken"))
					}
					if err := h.Exec.Finish(id, o); err != nil {
						t.Fatal(err)
					}
					run := running[id]
					if run == nil {
						t.Fatalf("step %d: %s runs on the engine, not on the core", step, id)
					}
					delete(running, id)
					run.Finish(o)
					settle()
				default:
					advance(time.Duration(r.IntN(120)) * time.Millisecond)
				}
			}
			advance(10 * time.Second)

			if err := h.Engine.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			engineEvents, _ := h.Engine.Events().Read(0, 1<<20, nil)
			strip := func(evs []engine.Event) []string {
				var out []string
				for _, ev := range evs {
					if ev.Type == engine.EventEngine {
						continue // the engine's own notices (start, shutdown)
					}
					out = append(out, fmt.Sprint(ev.Type, ev.TaskID, ev.AgentID, ev.From, ev.To, ev.Reason, ev.At.UnixNano()))
				}
				return out
			}
			want, got := strip(engineEvents), strip(coreEvents)
			if len(want) < 200 {
				t.Fatalf("only %d events: the scenario exercises too little", len(want))
			}
			if !slices.Equal(want, got) {
				i := 0
				for i < min(len(want), len(got)) && want[i] == got[i] {
					i++
				}
				t.Fatalf("the streams part at event %d of %d/%d:\nengine %v\ncore   %v", i, len(want), len(got),
					want[i:min(i+3, len(want))], got[i:min(i+3, len(got))])
			}
		})
	}
}
