// Package fairshare is the built-in fairness policy. Among the eligible queue
// heads it picks:
//
//  1. a head that has waited at least the aging threshold (oldest first), so no
//     queue starves however busy its agent is;
//  2. otherwise the agent with the smallest weighted share of work in flight
//     (in-flight ÷ weight), so an agent with nothing running goes before one
//     that already has tasks out;
//  3. then the agent with the larger weight;
//  4. then the oldest head (lowest submission sequence).
//
// Every tie ends at rule 4, and sequences are unique, so the choice never
// depends on map or slice order.
package fairshare

import "github.com/switchyard/switchyard/engine/policy"

// Name is the policy's registered name.
const Name = "fair-share"

// Before reports whether candidate a goes before candidate b under rules 2–4,
// given extra in-flight tasks already picked in this decision. Aging (rule 1)
// is applied by the caller. The engine's native dispatcher orders its queues
// with this same function.
func Before(aInflight, aWeight uint32, aSeq uint64, bInflight, bWeight uint32, bSeq uint64) bool {
	// a.inflight/a.weight < b.inflight/b.weight, without division.
	l, r := uint64(aInflight)*uint64(bWeight), uint64(bInflight)*uint64(aWeight)
	if l != r {
		return l < r
	}
	if aWeight != bWeight {
		return aWeight > bWeight
	}
	return aSeq < bSeq
}

// Fairness implements policy.Fairness. It keeps scratch space between calls,
// so one value must not be used by two goroutines at once; the zero value is
// ready to use.
//
// A decision takes one of two paths that always agree (reference_test.go
// holds them to the original implementation). The fast path (fast.go) packs
// each candidate's order into two integers and keeps a tournament tree of
// them, so a decision is a few hundred branch-free steps: this matters most
// when the policy runs as a WebAssembly plugin, where every taken branch of
// Go code costs an indirect jump. It takes input as the engine makes it:
// candidates in submission order, weights below 2048, fewer than 1,024
// candidates and 256 lanes. Anything else goes to the exact path (exact.go),
// a heap ordered by the full comparison.
type Fairness struct {
	fast  *fast // allocated on first use: about 75 KiB
	exact exact
}

// Pick implements policy.Fairness.
func (f *Fairness) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if f.fast == nil {
		f.fast = new(fast)
	}
	if n, ok := f.fast.pick(ctx, cands, picks); ok {
		return n
	}
	return f.exact.pick(ctx, cands, picks)
}

// full reports whether a ceiling of limit has no room for one more task,
// with inflight tasks out and extra picked in this decision. The sum cannot
// overflow, so a full queue, agent or lane stays full for the rest of a
// decision.
func full(inflight, extra, limit uint32) bool {
	return uint64(inflight)+uint64(extra) >= uint64(limit)
}
