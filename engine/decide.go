package engine

import (
	"slices"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priofirst"
	"github.com/switchyard/switchyard/engine/policy/priority"
)

// Where policy decisions run. A policy that is inline (the native built-ins,
// or any policy.Inline) decides while the engine holds its lock: its
// decisions are bounded by their input and cost less than a lock handoff.
// Any other policy (a WebAssembly plugin) decides outside the lock, on a
// snapshot prepared under it; the engine then takes the lock again and
// applies the answer only if it still fits:
//
//   - selection: admission records the tasks (QUEUED or WAITING) but keeps
//     them out of their queues (task.unranked) until their lane's policy has
//     ranked them; then those still QUEUED go into their queues, and those
//     cancelled or expired meanwhile are skipped.
//   - fairness: a round's candidates are copied, the policy picks among
//     them, and each pick is checked against every ceiling as it is applied
//     (as the engine always did: the policy never sees every ceiling).
//   - retry: the failure record is built as the attempt's end will build
//     it, the policy decides, and the decision is applied if the attempt
//     still holds its lease and its record is unchanged; otherwise the
//     engine asks again, under the lock, with the record as it now is.
//
// So a slow decision delays only the submission, round or attempt that
// asked for it, never the engine's other work; the plugin host bounds how
// slow it can be (its deadline) and for how long (its breaker). With a fake
// clock and one caller at a time nothing can happen between the snapshot
// and the answer, and the engine stays deterministic.

// inline reports whether policy p may decide under the engine lock.
func inline(p any) bool {
	switch p.(type) {
	case priority.Selection, *priority.Selection, backoff.Retry, *backoff.Retry, *fairshare.Fairness, *priofirst.Fairness:
		return true
	}
	return policy.IsInline(p)
}

// rankJob is one lane's share of a submission, ranked outside the lock.
type rankJob struct {
	p     policy.Selection
	tasks []*task
	recs  []policy.Task
	ranks []int64
}

// rankLocked ranks the tasks a submission admitted (QUEUED or WAITING, in
// admission order) with their lanes' selection policies, one call per lane.
// Lanes whose policy is inline are ranked now and their QUEUED tasks put
// into their queues, in admission order; the others are returned as jobs for
// rankOutside, their tasks kept out of their queues until applyRanksLocked.
// (With a durable store a task may be dispatched before its commit: its
// attempt starts only once it is written, see dispatchRound.)
func (e *Engine) rankLocked(ts []*task, now time.Time) []rankJob {
	ts = slices.DeleteFunc(ts, func(t *task) bool { return !t.unranked }) // an idempotent repeat's original keeps its rank
	if len(ts) == 0 {
		return nil
	}
	groups := ts
	if slices.ContainsFunc(ts, func(t *task) bool { return t.lane != ts[0].lane }) {
		groups = slices.Clone(ts)
		slices.SortStableFunc(groups, func(a, b *task) int { return int(a.lane.idx) - int(b.lane.idx) })
	}
	var jobs []rankJob
	for start := 0; start < len(groups); {
		end := start
		for end < len(groups) && groups[end].lane == groups[start].lane {
			end++
		}
		group := groups[start:end]
		if sel := group[0].lane.selection; !sel.inline {
			j := rankJob{p: sel.p, tasks: slices.Clone(group), recs: make([]policy.Task, len(group)), ranks: make([]int64, len(group))}
			for i, t := range group {
				j.recs[i] = policyTask(t)
			}
			jobs = append(jobs, j)
		} else {
			e.rankGroupLocked(group, now)
		}
		start = end
	}
	for _, t := range ts {
		if !t.unranked && t.state == StateQueued && t.sq == nil {
			e.enqueueLocked(t)
		}
	}
	return jobs
}

// rankGroupLocked ranks tasks of one lane in one call of an inline policy.
func (e *Engine) rankGroupLocked(group []*task, now time.Time) {
	recs := e.scratchRank[:0]
	for _, t := range group {
		recs = append(recs, policyTask(t))
	}
	if cap(e.scratchRanks) < len(group) {
		e.scratchRanks = make([]int64, len(group))
	}
	ranks := e.scratchRanks[:len(group)]
	group[0].lane.selection.p.Rank(now.UnixMilli(), recs, ranks)
	for i, t := range group {
		t.rank, t.unranked = ranks[i], false
	}
	e.scratchRank = recs
}

// rankOutside makes the jobs' policy calls; the engine lock is not held.
func rankOutside(jobs []rankJob, now time.Time) {
	for _, j := range jobs {
		j.p.Rank(now.UnixMilli(), j.recs, j.ranks)
	}
}

// applyRanksLocked gives the jobs' tasks their ranks and puts those still
// QUEUED into their queues. Tasks that ended meanwhile are skipped; tasks
// that became QUEUED meanwhile (their dependencies met) are queued now.
func (e *Engine) applyRanksLocked(jobs []rankJob) {
	for _, j := range jobs {
		for i, t := range j.tasks {
			t.rank, t.unranked = j.ranks[i], false
			if e.tasks[t.id] == t {
				e.markDirty(t) // its row may have been written before it had its rank
			}
			if t.state == StateQueued && t.sq == nil {
				e.enqueueLocked(t)
			}
		}
	}
}
