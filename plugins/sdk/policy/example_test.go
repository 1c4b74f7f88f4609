package policy_test

import (
	"fmt"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// capOne is a fairness policy that lets the agent named "crawler" run at
// most one task at a time and serves every other queue longest-waiting
// first. It holds when the only candidates left are the crawler's.
type capOne struct{}

func (capOne) MayHold() bool { return true }

func (capOne) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	n, held := 0, false
	for n < len(picks) {
		best := -1
		for i, c := range cands {
			if c.HeadWaitMs < 0 {
				continue // picked already
			}
			if ctx.Names != nil && ctx.Names.AgentID(i) == "crawler" && c.AgentInflight > 0 {
				held = true
				continue
			}
			if best < 0 || c.HeadWaitMs > cands[best].HeadWaitMs {
				best = i
			}
		}
		if best < 0 {
			break
		}
		picks[n] = uint32(best)
		n++
		cands[best].HeadWaitMs = -1 // one pick per queue in this sketch
		cands[best].AgentInflight++
	}
	if n == 0 && held {
		return policy.Hold(500) // nothing else to run: ask again in 500 ms
	}
	return n
}

// names is what the engine passes as PickContext.Names, for a native test.
type names []string

func (n names) AgentID(i int) string { return n[i] }
func (n names) LaneName(int) string  { return "main" }

// A fairness policy is plain Go: test it natively, with the records and
// names the engine would pass, before building it for wasip1 and
// registering it with fairness.Register.
func Example_fairness() {
	var p capOne
	cands := []policy.Candidate{
		{Agent: 0, HeadWaitMs: 900, AgentInflight: 1, AgentLimit: 4, QueueLen: 3},
		{Agent: 1, HeadWaitMs: 100, AgentLimit: 4, QueueLen: 1},
	}
	picks := make([]uint32, 2)
	ctx := policy.PickContext{Slots: 2, Names: names{"crawler", "shop"}}
	n := p.Pick(ctx, cands, picks)
	fmt.Println("picked:", picks[:n])

	// Only the busy crawler is left: the policy holds.
	cands = cands[:1]
	cands[0].HeadWaitMs = 900
	ctx.Names = names{"crawler"}
	answer := p.Pick(ctx, cands, picks)
	hint, held := policy.HoldHint(answer)
	fmt.Println("held:", held, "ask again in", hint, "ms")
	// Output:
	// picked: [1]
	// held: true ask again in 500 ms
}

// patient is a retry policy: transient failures back off from the lane's
// base delay, doubling, up to the budget; anything else fails at once.
type patient struct{}

func (patient) Decide(f policy.Failure) policy.Decision {
	if f.Class != policy.ClassTransient || f.Attempt >= f.MaxAttempts {
		return policy.Decision{Action: policy.ActionFail}
	}
	delay := f.BaseDelayMs << (f.Attempt - 1)
	return policy.Decision{Action: policy.ActionRetry, DelayMs: min(delay, f.MaxDelayMs)}
}

// A retry policy answers one Failure with one Decision; policy.Valid is the
// check the engine applies to a plugin's answer.
func Example_retry() {
	var p patient
	for attempt := uint16(1); attempt <= 4; attempt++ {
		d := p.Decide(policy.Failure{Class: policy.ClassTransient, Attempt: attempt, MaxAttempts: 4, BaseDelayMs: 250, MaxDelayMs: 1000})
		fmt.Println(attempt, d.Action, d.DelayMs, policy.Valid(d))
	}
	// Output:
	// 1 retry 250 true
	// 2 retry 500 true
	// 3 retry 1000 true
	// 4 fail 0 true
}

// Agent ids and lane names have stable keys: the same on every server and
// across restarts, unlike the records' Agent and Lane indices.
func ExampleKey() {
	fmt.Printf("%#x\n", policy.Key("crawler"))
	fmt.Println(policy.Key("crawler") == policy.Key("shop"))
	// Output:
	// 0xc8548dcd56369f77
	// false
}
