// The wrappers are what the engine holds: plain policy values that ask the
// plugin and, when it cannot answer, ask the native fallback instead.

package host

import (
	"fmt"
	"sync"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

// fallback serialises calls to a native policy, which may keep scratch space
// and so need not be safe for concurrent use.
type fallback struct {
	mu sync.Mutex
}

func (p *Plugin) checkSlot(s policy.Slot, fb any) error {
	if p.slot != s {
		return fmt.Errorf("plugin %q is a %s policy, not a %s policy", p.name, p.slot, s)
	}
	if fb == nil {
		return fmt.Errorf("plugin %q: a %s wrapper needs a fallback policy", p.name, s)
	}
	return nil
}

// Fairness returns a policy.Fairness that decides with the plugin and falls
// back to fb whenever the plugin cannot answer validly. It is safe for
// concurrent use. It fails if the plugin is not a fairness policy.
func (p *Plugin) Fairness(fb policy.Fairness) (*Fairness, error) {
	if err := p.checkSlot(policy.SlotFairness, fb); err != nil {
		return nil, err
	}
	return &Fairness{p: p, fb: fb}, nil
}

// Fairness is a plugin-backed policy.Fairness with a native fallback.
type Fairness struct {
	p  *Plugin
	fb policy.Fairness
	mu fallback
}

// Plugin returns the plugin behind the wrapper.
func (w *Fairness) Plugin() *Plugin { return w.p }

// Stateless implements policy.StateReporter: the plugin declared that it
// keeps no state between decisions.
func (w *Fairness) Stateless() bool { return w.p.Stateless() }

// MayHold implements policy.Holder: the module declared (ABI v2) that it
// may answer hold.
func (w *Fairness) MayHold() bool { return w.p.mayHold() }

// UsesDetails implements policy.DetailUser: only a module that declared it
// reads details (ABI v2) is sent them, so the engine copies the candidates'
// details for no other (their names it copies anyway, cheaply).
func (w *Fairness) UsesDetails() bool { return w.p.entry() >= abi.DetailEntrySize }

// Pick implements policy.Fairness.
func (w *Fairness) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	n, _ := w.pick(ctx, cands, picks, false)
	return n
}

// PickExplained implements policy.ExplainedFairness: it picks as Pick
// does, and when the fallback picked, says why the plugin did not.
func (w *Fairness) PickExplained(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) (int, string) {
	return w.pick(ctx, cands, picks, true)
}

func (w *Fairness) pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32, explain bool) (int, string) {
	w.p.stats.calls.Add(1)
	n, r := w.p.pick(ctx, cands, picks)
	if r.o == decided {
		if _, held := policy.HoldHint(n); held && ctx.Flags&policy.PickDryRun == 0 {
			w.p.stats.holds.Add(1)
		}
		return n, ""
	}
	why := w.p.fallback(r, explain)
	w.mu.mu.Lock()
	defer w.mu.mu.Unlock()
	return w.fb.Pick(ctx, cands, picks), why
}

// Selection returns a policy.Selection that ranks with the plugin and falls
// back to fb whenever the plugin cannot answer. It is safe for concurrent
// use. It fails if the plugin is not a selection policy.
func (p *Plugin) Selection(fb policy.Selection) (*Selection, error) {
	if err := p.checkSlot(policy.SlotSelection, fb); err != nil {
		return nil, err
	}
	return &Selection{p: p, fb: fb}, nil
}

// Selection is a plugin-backed policy.Selection with a native fallback.
type Selection struct {
	p  *Plugin
	fb policy.Selection
	mu fallback
}

// Plugin returns the plugin behind the wrapper.
func (w *Selection) Plugin() *Plugin { return w.p }

// UsesDetails implements policy.DetailUser: only a module that declared
// it reads names or details (ABI v2) is sent the tasks' table, so the engine
// copies them for no other.
func (w *Selection) UsesDetails() bool { return w.p.entry() != 0 }

// Rank implements policy.Selection.
func (w *Selection) Rank(nowMs int64, tasks []policy.Task, ranks []int64) {
	w.RankDetailed(policy.RankContext{NowMs: nowMs}, tasks, ranks)
}

// RankDetailed implements policy.DetailedSelection: a module that asked for
// names or details (ABI v2) gets them from ctx.Details; the fallback ranks
// without them.
func (w *Selection) RankDetailed(ctx policy.RankContext, tasks []policy.Task, ranks []int64) {
	nowMs := ctx.NowMs
	w.p.stats.calls.Add(1)
	r := w.p.rank(nowMs, ctx.Details, tasks, ranks)
	if r.o == decided {
		return
	}
	w.p.fallback(r, false)
	w.mu.mu.Lock()
	defer w.mu.mu.Unlock()
	w.fb.Rank(nowMs, tasks, ranks)
}

// Retry returns a policy.Retry that decides with the plugin and falls back
// to fb whenever the plugin cannot answer validly. It is safe for concurrent
// use. It fails if the plugin is not a retry policy.
func (p *Plugin) Retry(fb policy.Retry) (*Retry, error) {
	if err := p.checkSlot(policy.SlotRetry, fb); err != nil {
		return nil, err
	}
	return &Retry{p: p, fb: fb}, nil
}

// Retry is a plugin-backed policy.Retry with a native fallback.
type Retry struct {
	p  *Plugin
	fb policy.Retry
	mu fallback
}

// Plugin returns the plugin behind the wrapper.
func (w *Retry) Plugin() *Plugin { return w.p }

// Decide implements policy.Retry.
func (w *Retry) Decide(f policy.Failure) policy.Decision {
	return w.DecideDetailed(policy.RetryContext{}, f)
}

// DecideDetailed implements policy.DetailedRetry: a module that asked for
// names or details (ABI v2) gets them from ctx.Details; the fallback
// decides without them.
func (w *Retry) DecideDetailed(ctx policy.RetryContext, f policy.Failure) policy.Decision {
	d, _ := w.decide(ctx, f, false)
	return d
}

// DecideExplained implements policy.ExplainedRetry: it decides as
// DecideDetailed does, and when the fallback decided, says why the plugin
// did not — so that the engine does not put the fallback's decision down
// to the plugin.
func (w *Retry) DecideExplained(ctx policy.RetryContext, f policy.Failure) (policy.Decision, string) {
	return w.decide(ctx, f, true)
}

func (w *Retry) decide(ctx policy.RetryContext, f policy.Failure, explain bool) (policy.Decision, string) {
	w.p.stats.calls.Add(1)
	d, r := w.p.decide(ctx.Details, &f)
	if r.o == decided {
		return d, ""
	}
	why := w.p.fallback(r, explain)
	w.mu.mu.Lock()
	defer w.mu.mu.Unlock()
	return w.fb.Decide(f), why
}

var (
	_ policy.Fairness          = (*Fairness)(nil)
	_ policy.DetailUser        = (*Fairness)(nil)
	_ policy.DetailUser        = (*Selection)(nil)
	_ policy.DetailedSelection = (*Selection)(nil)
	_ policy.DetailedRetry     = (*Retry)(nil)
	_ policy.ExplainedRetry    = (*Retry)(nil)
	_ policy.ExplainedFairness = (*Fairness)(nil)
)

// fallback counts a decision that fell back for r, by its cause, and says
// why, when explain is set (policy.ExplainedRetry and
// policy.ExplainedFairness).
func (p *Plugin) fallback(r result, explain bool) string {
	p.stats.fallbacks.Add(1)
	p.stats.fallbacksBy[r.o.cause()].Add(1)
	if !explain {
		return ""
	}
	return p.fellBack(r)
}
