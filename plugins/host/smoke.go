package host

import (
	"fmt"

	"github.com/switchyard/switchyard/engine/policy"
)

// smokeNowMs is the synthetic clock of the smoke decision.
const smokeNowMs = 1_700_000_000_000

// smoke makes one decision on synthetic input, so that a module that cannot
// decide is refused at load rather than at its first real decision.
func (in *instance) smoke() error {
	var f fault
	switch in.plugin.slot {
	case policy.SlotFairness:
		cands := SyntheticCandidates(8, 1)
		picks := make([]uint32, 4)
		_, f = in.pick(policy.PickContext{NowMs: smokeNowMs, AgingMs: 30_000, Slots: 4}, cands, picks)
	case policy.SlotSelection:
		tasks := SyntheticTasks(8, 1)
		f = in.rank(smokeNowMs, tasks, make([]int64, len(tasks)))
	case policy.SlotRetry:
		_, f = in.decideRetry(&policy.Failure{
			NowMs: smokeNowMs, TaskSeq: 1, CreatedAtMs: smokeNowMs - 1000,
			BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
			Attempt: 1, MaxAttempts: 4, HTTPStatus: 503, Class: policy.ClassTransient,
		})
	}
	if f.kind != 0 {
		return fmt.Errorf("%s: %s", f.kind, f.reason)
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
