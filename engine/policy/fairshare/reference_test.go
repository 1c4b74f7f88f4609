package fairshare

import "github.com/switchyard/switchyard/engine/policy"

// refPick is the policy as the package documentation states it, written to
// be obviously right rather than fast: before every pick it scans all
// candidates, drops those whose queue, agent or lane is full, and takes the
// best of the rest under rules 1–4. Fairness.Pick must agree with it
// decision for decision, on both of its paths.
//
// (It replaced an earlier reference that shared the first implementation's
// heap: after a pick that heap re-sifted the picked agent's queues in
// candidate order rather than bottom-up, which could leave a worse queue
// above a better one when an agent had queues in several lanes, so both
// occasionally picked a queue other than the best.)
func refPick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	extra := map[uint32]uint32{} // per agent, picked in this decision
	lane := map[uint16]uint32{}  // per lane, picked in this decision
	taken := make([]uint32, len(cands))
	aged := make([]bool, len(cands))
	for i, c := range cands {
		aged[i] = ctx.AgingMs > 0 && c.HeadWaitMs >= ctx.AgingMs
	}
	less := func(a, b int) bool {
		ca, cb := &cands[a], &cands[b]
		if aged[a] != aged[b] {
			return aged[a]
		}
		if aged[a] && ca.HeadWaitMs != cb.HeadWaitMs {
			return ca.HeadWaitMs > cb.HeadWaitMs
		}
		return Before(ca.AgentInflight+extra[ca.Agent], max(ca.AgentWeight, 1), ca.HeadSeq,
			cb.AgentInflight+extra[cb.Agent], max(cb.AgentWeight, 1), cb.HeadSeq)
	}
	n := 0
	for n < len(picks) {
		best := -1
		for i := range cands {
			c := &cands[i]
			if taken[i] >= c.QueueLen || full(c.AgentInflight, extra[c.Agent], c.AgentLimit) ||
				full(c.LaneInflight, lane[c.Lane], c.LaneLimit) {
				continue
			}
			if best < 0 || less(i, best) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		picks[n] = uint32(best)
		n++
		c := &cands[best]
		taken[best]++
		aged[best] = false
		extra[c.Agent]++
		lane[c.Lane]++
	}
	return n
}
