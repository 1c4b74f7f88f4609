package engine

import (
	"slices"
	"sync"
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
//     cancelled or expired meanwhile are skipped. The ranks stand if the
//     lane's policy was replaced meanwhile, as those of tasks queued before
//     the change do.
//   - fairness: a round's candidates are copied, the policy picks among
//     them, and each pick is checked against every ceiling as it is applied
//     (as the engine always did: the policy never sees every ceiling),
//     whichever policy made it; a change of policy runs another round. A
//     worker's Pull decides the same way over its pull lane's heads, on a
//     copy of its own (pullByPolicyLocked): several pulls and a round may
//     be deciding at once.
//   - retry: the failure record is built as the attempt's end will build
//     it, the policy decides, and the decision is applied if the attempt
//     still holds its lease, the lane still has that policy (the same
//     assignment, named.gen: a module reloaded under its name and
//     assigned again is another policy) and its record is unchanged —
//     with the details the policy read (ABI v2: the agent's weight,
//     ceiling, labels), which may change meanwhile; otherwise the engine
//     asks the lane's policy again, under the lock, with the record and
//     details as they now are.
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

// rankJobs are the lanes of a submission whose selection policy is not
// inline, ranked outside the lock: one job (one policy call) per lane, over
// slices of shared arrays. Pooled, so that a submission ranked outside the
// lock allocates nothing for it.
type rankJobs struct {
	jobs  []rankJob
	tasks []*task
	recs  []policy.Task
	ranks []int64
	dets  details // for the jobs whose policy reads them; empty elsewhere
}

// rankJob is one lane's share: tasks[start:start+n] of its rankJobs.
type rankJob struct {
	p        policy.Selection
	start, n int
	detailed bool // p is a policy.DetailedSelection that reads them; dets holds its tasks' details
}

var rankJobsPool = sync.Pool{New: func() any { return new(rankJobs) }}

// add makes a job of group for p.
func (r *rankJobs) add(p policy.Selection, group []*task) {
	_, detailed := p.(policy.DetailedSelection)
	detailed = detailed && policy.UsesDetails(p)
	r.jobs = append(r.jobs, rankJob{p: p, start: len(r.tasks), n: len(group), detailed: detailed})
	r.tasks = append(r.tasks, group...)
	for _, t := range group {
		r.recs = append(r.recs, policyTask(t))
	}
	if detailed {
		r.dets = slices.Grow(r.dets, len(r.tasks))[:len(r.tasks)-len(group)]
		for _, t := range group {
			r.dets = append(r.dets, detailOf(t, ""))
		}
	}
	r.ranks = slices.Grow(r.ranks, len(group))[:len(r.ranks)+len(group)]
}

// release returns r to the pool.
func (r *rankJobs) release() {
	clear(r.tasks)
	clear(r.jobs)
	clear(r.dets)
	r.jobs, r.tasks, r.recs, r.ranks, r.dets = r.jobs[:0], r.tasks[:0], r.recs[:0], r.ranks[:0], r.dets[:0]
	rankJobsPool.Put(r)
}

// rankLocked ranks the tasks a submission admitted (QUEUED or WAITING, in
// admission order) with their lanes' selection policies, one call per lane.
// Lanes whose policy is inline are ranked now and their QUEUED tasks put
// into their queues, in admission order; the others are returned as jobs for
// rankOutside, their tasks kept out of their queues until applyRanksLocked.
// (With a durable store a task may be dispatched before its commit: its
// attempt starts only once it is written, see dispatchRound.)
func (c *core) rankLocked(ts []*task, now time.Time) *rankJobs {
	ts = slices.DeleteFunc(ts, func(t *task) bool { return !t.unranked }) // an idempotent repeat's original keeps its rank
	if len(ts) == 0 {
		return nil
	}
	groups := ts
	if slices.ContainsFunc(ts, func(t *task) bool { return t.lane != ts[0].lane }) {
		groups = slices.Clone(ts)
		slices.SortStableFunc(groups, func(a, b *task) int { return int(a.lane.idx) - int(b.lane.idx) })
	}
	var jobs *rankJobs
	for start := 0; start < len(groups); {
		end := start
		for end < len(groups) && groups[end].lane == groups[start].lane {
			end++
		}
		group := groups[start:end]
		if sel := group[0].lane.selection; !sel.inline {
			if jobs == nil {
				jobs = rankJobsPool.Get().(*rankJobs)
			}
			jobs.add(sel.p, group)
		} else {
			c.rankGroupLocked(group, now)
		}
		start = end
	}
	for _, t := range ts {
		if !t.unranked && t.state == StateQueued && t.sq == nil {
			c.enqueueLocked(t)
		}
	}
	return jobs
}

// rankGroupLocked ranks tasks of one lane in one call of an inline policy.
func (c *core) rankGroupLocked(group []*task, now time.Time) {
	recs := c.scratchRank[:0]
	for _, t := range group {
		recs = append(recs, policyTask(t))
	}
	if cap(c.scratchRanks) < len(group) {
		c.scratchRanks = make([]int64, len(group))
	}
	ranks := c.scratchRanks[:len(group)]
	if dp, ok := group[0].lane.selection.p.(policy.DetailedSelection); ok {
		d := make(details, len(group))
		for i, t := range group {
			d[i] = detailOf(t, "")
		}
		dp.RankDetailed(policy.RankContext{NowMs: now.UnixMilli(), Details: d}, recs, ranks)
	} else {
		group[0].lane.selection.p.Rank(now.UnixMilli(), recs, ranks)
	}
	for i, t := range group {
		t.rank, t.unranked = ranks[i], false
	}
	c.scratchRank = recs
}

// rankOutside makes the jobs' policy calls; the engine lock is not held.
func (r *rankJobs) rankOutside(now time.Time) {
	for _, j := range r.jobs {
		recs, ranks := r.recs[j.start:j.start+j.n], r.ranks[j.start:j.start+j.n]
		if j.detailed {
			ctx := policy.RankContext{NowMs: now.UnixMilli(), Details: r.dets[j.start : j.start+j.n]}
			j.p.(policy.DetailedSelection).RankDetailed(ctx, recs, ranks)
		} else {
			j.p.Rank(now.UnixMilli(), recs, ranks)
		}
	}
}

// applyRanksLocked gives the jobs' tasks their ranks and puts those still
// QUEUED into their queues. Tasks that ended meanwhile are skipped; tasks
// that became QUEUED meanwhile (their dependencies met) are queued now.
func (c *core) applyRanksLocked(r *rankJobs) {
	for i, t := range r.tasks {
		t.rank, t.unranked = r.ranks[i], false
		if c.tasks[t.id] == t {
			c.markDirty(t) // its row may have been written before it had its rank
		}
		if t.state == StateQueued && t.sq == nil {
			c.enqueueLocked(t)
		}
	}
}
