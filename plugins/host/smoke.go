package host

import (
	"fmt"

	"github.com/switchyard/switchyard/engine/policy"
)

// smokeNowMs is the synthetic clock of the smoke decision.
const smokeNowMs = 1_700_000_000_000

// smoke makes one decision on synthetic input, so that a module that cannot
// decide is refused at load rather than at its first real decision, and a
// configuration under which it cannot decide is refused by Configure. A
// fault is a *SmokeError; after one the instance must be discarded.
func (in *instance) smoke() error {
	var f fault
	switch in.plugin.slot {
	case policy.SlotFairness:
		cands := SyntheticCandidates(8, 1)
		picks := make([]uint32, 4)
		d := SyntheticDetails(len(cands), "")
		_, f = in.pick(policy.PickContext{NowMs: smokeNowMs, AgingMs: 30_000, Slots: 4, Names: d, Details: d}, cands, picks)
	case policy.SlotSelection:
		tasks := SyntheticTasks(8, 1)
		f = in.rank(smokeNowMs, SyntheticDetails(len(tasks), ""), tasks, make([]int64, len(tasks)))
	case policy.SlotRetry:
		_, f = in.decideRetry(SyntheticDetails(1, "timeout"), &policy.Failure{
			NowMs: smokeNowMs, TaskSeq: 1, CreatedAtMs: smokeNowMs - 1000,
			BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
			Attempt: 1, MaxAttempts: 4, HTTPStatus: 503, Class: policy.ClassTransient,
		})
	}
	if f.kind != 0 {
		return &SmokeError{Kind: f.kind, Reason: f.reason}
	}
	return nil
}

// SyntheticCandidates returns n plausible fairness candidates: agents and
// lanes spread out, varied in-flight counts, weights and waits, with room
// left under every ceiling. seed varies the numbers deterministically.
func SyntheticCandidates(n int, seed uint64) []policy.Candidate {
	cands := make([]policy.Candidate, n)
	x := seed | 1
	next := func(m uint64) uint64 { // xorshift: deterministic, dependency-free
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x % m
	}
	for i := range cands {
		cands[i] = policy.Candidate{
			HeadSeq:       uint64(i)*7 + next(7),
			HeadRank:      int64(next(4)),
			HeadWaitMs:    int64(next(60_000)),
			HeadPriority:  int32(next(4)),
			Agent:         uint32(i),
			AgentInflight: uint32(next(5)),
			AgentLimit:    10,
			AgentWeight:   1 + uint32(next(3)),
			Lane:          uint16(next(4)),
			LaneInflight:  uint32(next(10)),
			LaneLimit:     30,
			QueueLen:      1 + uint32(next(20)),
		}
	}
	return cands
}

// SyntheticTasks returns n plausible tasks submitted over the last minute
// before nowMs, some with deadlines. seed varies them deterministically.
func SyntheticTasks(n int, seed uint64) []policy.Task {
	tasks := make([]policy.Task, n)
	x := seed | 1
	next := func(m uint64) uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x % m
	}
	for i := range tasks {
		t := policy.Task{
			Seq:         uint64(i + 1),
			CreatedAtMs: smokeNowMs - 60_000 + int64(i)*10,
			Priority:    int32(next(4)),
			Agent:       uint32(next(8)),
			Lane:        uint16(next(4)),
			Attempts:    uint16(next(3)),
		}
		if next(2) == 0 {
			t.DeadlineMs = smokeNowMs + int64(next(120_000))
		}
		tasks[i] = t
	}
	return tasks
}

// SyntheticDetails returns plausible details (ABI v2) for n records: agent
// ids agent-N, lane names lane-N, sessions session-N (none for every third
// record), task labels kind=search or kind=form, agent labels tier=gold or
// tier=standard, weights 1 to 3, ceilings of 10, and code as every
// record's error code.
func SyntheticDetails(n int, code string) policy.Details {
	d := make(syntheticDetails, n)
	for i := range d {
		kind, tier := "search", "standard"
		if i%2 == 1 {
			kind = "form"
		}
		if i%4 == 0 {
			tier = "gold"
		}
		session := fmt.Sprintf("session-%d", i)
		if i%3 == 2 {
			session = ""
		}
		d[i] = syntheticRecord{
			agent: fmt.Sprintf("agent-%d", i), lane: fmt.Sprintf("lane-%d", i%4), session: session,
			labels: policy.MakeLabels(map[string]string{"kind": kind}),
			info:   policy.AgentInfo{Weight: 1 + uint32(i%3), MaxInFlight: 10, Labels: policy.MakeLabels(map[string]string{"tier": tier})},
			code:   code,
		}
	}
	return d
}

type syntheticRecord struct {
	agent, lane, session, code string
	labels                     policy.Labels
	info                       policy.AgentInfo
}

type syntheticDetails []syntheticRecord

func (d syntheticDetails) at(i int) syntheticRecord {
	if i < 0 || i >= len(d) {
		return syntheticRecord{}
	}
	return d[i]
}

func (d syntheticDetails) AgentID(i int) string         { return d.at(i).agent }
func (d syntheticDetails) LaneName(i int) string        { return d.at(i).lane }
func (d syntheticDetails) Session(i int) string         { return d.at(i).session }
func (d syntheticDetails) Labels(i int) policy.Labels   { return d.at(i).labels }
func (d syntheticDetails) Agent(i int) policy.AgentInfo { return d.at(i).info }
func (d syntheticDetails) ErrorCode(i int) string       { return d.at(i).code }
