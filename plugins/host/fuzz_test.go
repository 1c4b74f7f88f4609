package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/host"
)

// fuzzCaseTimeout bounds one module's load and decisions: the fuel budgets
// stop a runaway guest in milliseconds, compiling a module of a few KiB
// takes less, so a case that takes this long is a hang.
const fuzzCaseTimeout = 20 * time.Second

// FuzzLoad feeds the host random bytes and mutations of valid modules (the
// AssemblyScript example, a fairness policy of 2 KiB; the fuzzer mutates
// its sections, code and data). Each is refused with an error wrapping
// ErrInvalid, or loads, decides through its wrapper and closes — never a
// panic, never a hang.
func FuzzLoad(f *testing.F) {
	asc, err := os.ReadFile(filepath.Join("..", "..", "examples", "plugins", "asc.wasm"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(asc)
	f.Add(asc[:len(asc)/2])
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x0a\x04\x01\x02\x00\x0b")) // one empty function
	f.Add([]byte("not wasm at all"))
	// Flip a byte in each section of the valid module, as seeds of its own.
	for _, at := range []int{8, 20, 60, len(asc) / 3, len(asc) / 2, len(asc) - 20} {
		m := append([]byte(nil), asc...)
		m[at] ^= 0x5a
		f.Add(m)
	}

	// One runtime per batch of cases: its in-memory compilation cache keeps
	// every module compiled, so it is replaced before it grows.
	var rt *host.Runtime
	cases := 0
	fresh := func(t *testing.T) *host.Runtime {
		if rt == nil || cases%200 == 0 {
			if rt != nil {
				_ = rt.Close(context.Background())
			}
			r, err := host.New(host.Config{NoFileCache: true, MemoryLimitPages: 64, DecisionFuel: 1_000_000, SetupFuel: 1_000_000, Instances: 1})
			if err != nil {
				t.Fatal(err)
			}
			rt = r
		}
		cases++
		return rt
	}
	f.Cleanup(func() {
		if rt != nil {
			_ = rt.Close(context.Background())
		}
	})

	f.Fuzz(func(t *testing.T, wasm []byte) {
		if len(wasm) > 256<<10 {
			return
		}
		rt := fresh(t)
		done := make(chan error, 1)
		go func() { done <- loadAndDecide(rt, wasm) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(fuzzCaseTimeout):
			t.Fatalf("loading a %d-byte module did not end within %s", len(wasm), fuzzCaseTimeout)
		}
	})
}

// loadAndDecide loads a module and, if it loads, makes decisions with it.
// It returns an error for what must not happen.
func loadAndDecide(rt *host.Runtime, wasm []byte) error {
	ctx := context.Background()
	p, err := rt.Load(ctx, "fuzz", wasm, nil)
	if err != nil {
		if !errors.Is(err, host.ErrInvalid) {
			return errors.New("a refusal that does not wrap ErrInvalid: " + err.Error())
		}
		return nil
	}
	defer p.Close(ctx)
	switch p.Slot() {
	case policy.SlotFairness:
		w, err := p.Fairness(&fairshare.Fairness{})
		if err != nil {
			return err
		}
		cands := []policy.Candidate{{HeadSeq: 1, Agent: 1, AgentLimit: 10, AgentWeight: 1, LaneLimit: 10},
			{HeadSeq: 2, Agent: 2, AgentLimit: 10, AgentWeight: 2, LaneLimit: 10}}
		picks := make([]uint32, 2)
		for i := 0; i < 3; i++ {
			n := w.Pick(policy.PickContext{NowMs: 1e12, Slots: 2}, cands, picks)
			if n < 0 || n > 2 {
				return errors.New("the wrapper answered an impossible number of picks")
			}
		}
	case policy.SlotSelection:
		w, err := p.Selection(priority.Selection{})
		if err != nil {
			return err
		}
		tasks := []policy.Task{{Seq: 1, Priority: 2}, {Seq: 2, Priority: 0}}
		w.Rank(1e12, tasks, make([]int64, len(tasks)))
	case policy.SlotRetry:
		w, err := p.Retry(backoff.Retry{})
		if err != nil {
			return err
		}
		w.Decide(policy.Failure{NowMs: 1e12, TaskSeq: 1, BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
			Attempt: 1, MaxAttempts: 4, Class: policy.ClassTransient})
	}
	return nil
}
