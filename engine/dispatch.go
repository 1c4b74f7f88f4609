package engine

import (
	"slices"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// Dispatch: choosing the next task, taking its slots, handing it over.
//
// The dispatcher runs when something may have made work possible: a
// submission, a completion, a timer, an operator's change. Each round takes
// the engine lock, makes as many decisions as there are free slots (at most
// maxPerRound), releases the lock and only then hands the attempts to the
// executor, so a slow executor never holds up the engine.

const maxPerRound = 512

type dispatchScratch struct {
	runs   []*Run
	cands  []policy.Candidate
	aqs    []*agentQueue
	picks  []uint32
	topK   []*agentQueue
	front  []int
	placed *instance
	// names behind cands (policy.Names), copied under the lock so that a
	// policy deciding outside it reads them safely
	agentIDs, laneNames []string
	// the heads' details (policy.Details), copied under the lock when the
	// fairness policy decides outside it and reads them (policy.UsesDetails);
	// nil otherwise
	dets details
	// live: the policy is inline and reads the details live, under the lock
	live bool
}

// enqueueLocked puts a QUEUED task into its subQueue.
func (c *core) enqueueLocked(t *task) {
	aq := c.agentQueueLocked(t.lane, t.agent)
	key := queueKey(t)
	sq := aq.subs[key]
	if sq == nil {
		if sq = aq.spare; sq != nil {
			aq.spare = nil
			sq.key, sq.session = key, t.session
		} else {
			sq = &subQueue{aq: aq, key: key, session: t.session, ready: -1}
		}
		aq.subs[key] = sq
	}
	var oldHead *task
	if sq.tasks.Len() > 0 {
		oldHead = sq.head()
	}
	sq.push(t)
	aq.queued++
	c.enqueued++
	switch {
	case sq.parked != nil:
		// A new head may not be blocked by what blocked the old one (a
		// session's ceiling blocks every head alike, so that wait stays).
		if oldHead != sq.head() && (sq.session == nil || sq.parked != &sq.session.lim) {
			c.unparkLocked(sq)
		}
	case sq.ready >= 0:
		if oldHead != sq.head() {
			aq.fixReady(sq)
			c.fixAQLocked(aq)
		}
	default:
		aq.addReady(sq)
		c.fixAQLocked(aq)
	}
}

// queueKey names t's subQueue within its (lane, agent) queue: its session;
// or, for a task without one in a batch with a parallelism cap, the batch, so
// that a batch at its cap holds up only its own tasks; else "".
func queueKey(t *task) string {
	if k := t.spec.Session(); k != "" {
		return k
	}
	if b := t.batch; b != nil && b.lim.limit > 0 {
		return "\x00" + b.id
	}
	return ""
}

// unqueueLocked takes a task out of its subQueue.
func (c *core) unqueueLocked(t *task) {
	sq := t.sq
	aq := sq.aq
	wasHead := t.heapIdx == 0
	sq.remove(t)
	aq.queued--
	c.enqueued--
	if sq.tasks.Len() == 0 {
		if sq.ready >= 0 {
			aq.removeReady(sq)
		}
		if sq.parked != nil {
			c.unlinkWaiterLocked(sq)
		}
		delete(aq.subs, sq.key)
		// Keep the empty subQueue (and its heap's array) for the next
		// one: a queue that empties and fills task by task, as one does
		// when dispatch keeps up, then allocates nothing.
		sq.key, sq.session = "", nil
		aq.spare = sq
		if len(aq.subs) == 0 {
			c.retireAQLocked(aq)
			return
		}
	} else if wasHead {
		switch {
		case sq.ready >= 0:
			aq.fixReady(sq)
		case sq.parked != nil && (sq.session == nil || sq.parked != &sq.session.lim):
			c.unparkLocked(sq)
		}
	}
	c.fixAQLocked(aq)
}

func (c *core) agentQueueLocked(l *lane, a *agent) *agentQueue {
	if int(l.idx) >= len(a.queues) {
		a.queues = append(a.queues, make([]*agentQueue, int(l.idx)+1-len(a.queues))...)
	}
	aq := a.queues[l.idx]
	if aq == nil {
		aq = &agentQueue{lane: l, agent: a, subs: map[string]*subQueue{}, fair: -1, age: -1}
		a.queues[l.idx] = aq
	}
	return aq
}

// retireAQLocked takes an emptied queue off its lane's heaps. It stays with
// its agent, empty, for the agent's next task in that lane: it goes when the
// agent does.
func (c *core) retireAQLocked(aq *agentQueue) {
	if aq.fair >= 0 {
		aq.lane.fair.remove(aq)
		aq.lane.age.remove(aq)
	}
}

// fixAQLocked puts aq where it belongs in its lane's heaps after its head or
// readiness changed.
func (c *core) fixAQLocked(aq *agentQueue) {
	l := aq.lane
	switch {
	case aq.eligible() && aq.fair < 0:
		l.fair.push(aq)
		l.age.push(aq)
	case aq.eligible():
		l.fair.fix(aq)
		l.age.fix(aq)
	case aq.fair >= 0:
		l.fair.remove(aq)
		l.age.remove(aq)
	}
}

// parkLocked makes sq wait on lim.
func (c *core) parkLocked(sq *subQueue, lim *limiter) {
	aq := sq.aq
	aq.removeReady(sq)
	sq.parked = lim
	sq.parkIdx = len(lim.waiters)
	lim.waiters = append(lim.waiters, sq)
	c.fixAQLocked(aq)
}

func (c *core) unlinkWaiterLocked(sq *subQueue) {
	lim := sq.parked
	last := len(lim.waiters) - 1
	if sq.parkIdx != last {
		lim.waiters[sq.parkIdx] = lim.waiters[last]
		lim.waiters[sq.parkIdx].parkIdx = sq.parkIdx
	}
	lim.waiters[last] = nil
	lim.waiters = lim.waiters[:last]
	sq.parked = nil
}

// unparkLocked makes a parked sq ready again.
func (c *core) unparkLocked(sq *subQueue) {
	c.unlinkWaiterLocked(sq)
	if sq.tasks.Len() > 0 {
		sq.aq.addReady(sq)
		c.fixAQLocked(sq.aq)
	}
}

// wakeLocked makes every queue waiting on lim ready: each gets a fresh look.
func (c *core) wakeLocked(lim *limiter) {
	for len(lim.waiters) > 0 {
		c.unparkLocked(lim.waiters[len(lim.waiters)-1])
	}
}

func (c *core) parkAgentLocked(a *agent) {
	a.parked = true
	for _, aq := range a.queues {
		if aq != nil {
			c.fixAQLocked(aq)
		}
	}
}

// agentChangedLocked reorders an agent's queues after its in-flight count
// changed, and takes it off or puts it back on the lanes at its ceiling.
func (c *core) agentChangedLocked(a *agent) {
	if a.parked && a.inflight < a.limit {
		a.parked = false
	}
	for _, aq := range a.queues {
		switch {
		case aq == nil:
		case aq.fair >= 0 && aq.eligible():
			aq.lane.fair.fix(aq) // only the share changed: the age order stands
		default:
			c.fixAQLocked(aq)
		}
	}
}

// reserveLocked takes every slot t needs.
func (c *core) reserveLocked(t *task, inst *instance) {
	c.inflight++
	t.lane.inflight++
	t.agent.inflight++
	c.agentChangedLocked(t.agent)
	if s := t.session; s != nil {
		s.lim.inflight++
	}
	if b := t.batch; b != nil {
		b.lim.inflight++
	}
	if inst != nil {
		inst.lim.inflight++
	}
	t.inst = inst
	t.holding = true
}

// releaseLocked frees the slots t holds and wakes every queue that could use
// them.
func (c *core) releaseLocked(t *task) {
	if !t.holding {
		return
	}
	t.holding = false
	c.inflight--
	t.lane.inflight--
	t.agent.inflight--
	c.agentChangedLocked(t.agent)
	if s := t.session; s != nil {
		s.lim.inflight--
		c.wakeLocked(&s.lim)
	}
	if b := t.batch; b != nil {
		b.lim.inflight--
		c.wakeLocked(&b.lim)
	}
	if inst := t.inst; inst != nil {
		inst.lim.inflight--
		c.wakeLocked(&inst.lim)
		c.wakeLocked(&c.pool)
		t.inst = nil
		if inst.removed && inst.lim.inflight == 0 && c.instances[inst.info.ID] == inst {
			delete(c.instances, inst.info.ID)
		}
	}
}

// laneTop returns the lane's best queue: the oldest head past the aging
// threshold, else the first in fairness order.
func (c *core) laneTop(l *lane, now int64) (*agentQueue, bool) {
	if c.cfg.AgingThreshold > 0 {
		if top := l.age.top(); now-top.head().queuedAt >= int64(c.cfg.AgingThreshold) {
			return top, true
		}
	}
	return l.fair.top(), false
}

func better(a *agentQueue, aAged bool, b *agentQueue, bAged bool) bool {
	if aAged != bAged {
		return aAged
	}
	if aAged {
		return ageBefore(a, b)
	}
	return fairBefore(a, b)
}

// laneOpen reports whether lane l may dispatch one more (slack raises the
// ceiling, for plans).
func (c *core) laneOpen(l *lane, slack int) bool {
	// A pull lane dispatches only when a worker asks (Pull).
	return !l.cfg.Paused && !l.cfg.Pull && l.inflight < l.cfg.MaxInFlight+slack && l.fair.Len() > 0
}

// nextLocked chooses the next task to dispatch under the native fairness
// order, parking every queue it finds blocked on the way, and reports
// whether its queue won by age (aged) rather than by fair share. It returns
// nil when nothing can run. The instance chosen for the task is left in
// e.scratch.placed. A plan asks it too (nextPlannedLocked), with slack.
func (c *core) nextLocked(now int64, slack int) (t *task, aged bool) {
	for c.inflight < c.cfg.MaxInFlight+slack {
		var best *agentQueue
		bestAged := false
		for _, l := range c.lanes {
			if !c.laneOpen(l, slack) {
				continue
			}
			aq, aged := c.laneTop(l, now)
			if best == nil || better(aq, aged, best, bestAged) {
				best, bestAged = aq, aged
			}
		}
		if best == nil {
			return nil, false
		}
		if t := c.admitHeadLocked(best, now); t != nil {
			return t, bestAged
		}
	}
	return nil, false
}

// admitHeadLocked checks aq's head task against its deadline and its
// ceilings at now (Unix ns). It returns the task when its deadline is still
// ahead and every ceiling has room; otherwise it parks what is blocked, or
// takes the head out of the way when its deadline has come
// (pastDeadlineLocked), and returns nil. Every pick — a round of dispatch,
// a worker's pull, a plan — goes through here, so nothing is dispatched or
// leased at or past its deadline, whether or not the deadline's timer has
// run yet.
func (c *core) admitHeadLocked(aq *agentQueue, now int64) *task {
	a := aq.agent
	if a.inflight >= a.limit {
		c.parkAgentLocked(a)
		return nil
	}
	sq := aq.ready.Top()
	t := sq.head()
	// A QUEUED task's timerAt[timerDeadline] is its deadline (enterLocked
	// sets it on the way in; 0: none): one comparison on a field of the
	// task itself, no clock read.
	if d := t.timerAt[timerDeadline]; d != 0 && d <= now {
		c.pastDeadlineLocked(t)
		return nil
	}
	if s := sq.session; s != nil && s.lim.full() {
		c.parkLocked(sq, &s.lim)
		return nil
	}
	if b := t.batch; b != nil && b.lim.full() {
		c.parkLocked(sq, &b.lim)
		return nil
	}
	inst, blocked := c.placeLocked(t)
	if blocked != nil {
		c.parkLocked(sq, blocked)
		return nil
	}
	c.scratch.placed = inst
	return t
}

// sessionLostLocked reports whether t's session is bound to a tab on an
// instance that was removed, or to a tab a task of another session closed
// (the page the session built is gone).
func (c *core) sessionLostLocked(t *task) bool {
	if t.session == nil || t.spec.TabID != "" {
		return false
	}
	b, ok := c.bindings[t.session.key]
	if !ok {
		return false
	}
	return b.lost || c.instanceGoneLocked(b.instance)
}

// instanceGoneLocked reports whether the engine places work on instances and
// id is not one of them (any more).
func (c *core) instanceGoneLocked(id string) bool {
	in := c.instances[id]
	return (len(c.instList) > 0 || c.fleet) && (in == nil || in.removed)
}

// placeLocked chooses the instance for t: its own target, its session's bound
// instance, or the least-loaded healthy instance with room. blocked is the
// limiter to wait on when there is no room. With Options.PlaceOnInstances, an
// action task waits for a browser instance even when none is registered (or
// none of its kind): dispatched unplaced, it could only fail.
func (c *core) placeLocked(t *task) (inst *instance, blocked *limiter) {
	if t.lane.cfg.Pull {
		return nil, nil // its worker is its instance
	}
	chat := t.spec.Instruction != ""
	if c.sessionLostLocked(t) {
		return nil, nil // no room needed: it fails at once (Run.LostSession)
	}
	if len(c.instList) == 0 {
		if c.fleet && !chat {
			return nil, &c.pool
		}
		return nil, nil
	}
	target := t.spec.InstanceID
	if target == "" && t.spec.TabID != "" && c.tabs != nil {
		target, _ = c.tabs.InstanceOfTab(t.spec.TabID)
	}
	if target == "" && t.session != nil {
		if b, ok := c.bindings[t.session.key]; ok {
			// The session's page is there, even while the instance is
			// unhealthy: the executor answers an instance fault until it is
			// back (or the session's tab is lost with it).
			target = b.instance
		}
	}
	if target != "" {
		in := c.instances[target]
		if in == nil || in.removed {
			return nil, nil // unknown here: the executor resolves it or fails the task
		}
		if in.lim.full() {
			return nil, &in.lim
		}
		return in, nil
	}
	var best *instance
	kindExists := false
	for _, in := range c.instList {
		if in.info.Chat != chat {
			continue
		}
		kindExists = true
		if !in.info.Healthy || in.lim.full() {
			continue
		}
		if best == nil || lessLoaded(in, best) {
			best = in
		}
	}
	switch {
	case best != nil:
		return best, nil
	case !kindExists && (chat || !c.fleet):
		return nil, nil // no instance of the kind at all: the executor says so
	}
	return nil, &c.pool
}

// lessLoaded compares in-flight ÷ capacity (unlimited capacity counts as
// empty); ties go to the earlier id (instList is sorted).
func lessLoaded(a, b *instance) bool {
	ca, cb := int64(a.lim.limit), int64(b.lim.limit)
	if ca == 0 || cb == 0 {
		return ca == 0 && cb != 0
	}
	return int64(a.lim.inflight)*cb < int64(b.lim.inflight)*ca
}

// dispatchRound makes one round of decisions (core.roundLocked) and starts
// the attempts. It reports whether another round may find work that this
// one left: only when it stopped at maxPerRound. A round that stopped
// sooner found nothing more that can go, and whatever changes that (a
// submission, an end, a timer, an operator's change, or a change made while
// a policy decided outside the lock) asks for another round itself
// (claimDispatchLocked: dispatchPending), so a round run only because this
// one dispatched something would find nothing.
func (e *Engine) dispatchRound() bool {
	var runs []*Run
	later, full := false, false
	pb, _ := e.apply(false, func(c *core) error {
		if c.closed || !e.running {
			return nil
		}
		c.stats.rounds++
		runs = c.roundLocked(c.now(), e.scratch.runs[:0])
		e.scratch.runs = runs[:0]
		full = len(runs) >= maxPerRound
		if len(runs) > 0 && e.durable && !e.sync {
			// Every attempt is on disk before it starts, so that a crash
			// can never leave an attempt that ran without a record: after
			// a restart it counts as interrupted, and no task runs more
			// often than its recorded attempts. The committer hands them
			// to the starter once their batch is written; meanwhile the
			// dispatcher goes on, and the tasks submitted since join the
			// same batch as their attempts.
			e.pending.runs = append(e.pending.runs, runs...)
			clear(runs)
			later = true
		}
		return nil
	})
	if later {
		e.commitSoon()
		return full
	}
	if len(runs) > 0 && e.durable {
		// Synchronous: commit the round's attempts before they start.
		e.commitNow()
		if !pb.none() && pb.err() != nil {
			// The store refused the commit (another node leads): these
			// attempts must not run; the engine is being abandoned.
			clear(runs)
			return false
		}
	}
	for i, r := range runs {
		e.exec.Start(r, r)
		runs[i] = nil
	}
	if len(runs) > 0 && e.sync {
		e.commitNow()
	}
	return full
}

// roundLocked makes one round of decisions: as many as there are free
// slots, maxPerRound at most, each checked against every ceiling. It
// appends the attempts to start to runs and returns them.
func (c *core) roundLocked(now time.Time, runs []*Run) []*Run {
	if c.fairness.p == policy.Fairness(c.native) {
		if len(c.held) > 0 { // a plugin held before the native policy took over
			c.clearHoldsLocked()
		}
		for len(runs) < maxPerRound {
			t, _ := c.nextLocked(now.UnixNano(), 0)
			if t == nil {
				break
			}
			runs = append(runs, c.assignLocked(t, c.scratch.placed, now, "dispatched"))
		}
		return runs
	}
	return c.pluginRoundLocked(now, runs)
}

// assignLocked dispatches t: it takes t's slots, opens an attempt under a new
// lease and returns the run to start. reason is the ASSIGNED event's:
// "dispatched" when pushed to the executor, "leased …" when a worker pulls.
func (c *core) assignLocked(t *task, inst *instance, now time.Time, reason string) *Run {
	c.reserveLocked(t, inst)
	c.nextLease++
	n := len(t.attempts) + 1
	timeout := t.spec.Timeout
	if timeout <= 0 {
		timeout = t.lane.cfg.Timeout
		if t.spec.Instruction != "" {
			timeout = max(timeout, c.cfg.ChatTimeout) // a chat turn takes longer than a click
		}
	}
	due := now.Add(timeout)
	if d := t.spec.Deadline; !d.IsZero() && d.Before(due) {
		due = d
	}
	r := &Run{owner: c.owner, task: t, spec: t.spec, id: t.id, lease: c.nextLease, attempt: n}
	if inst != nil {
		r.instance = inst.info.ID
	}
	r.tab = t.spec.TabID
	if r.tab == "" && t.session != nil {
		if b, ok := c.bindings[t.session.key]; ok {
			switch {
			case c.sessionLostLocked(t):
				// Placed nowhere, with its lost tab: the executor fails the
				// attempt with SESSION_LOST instead of opening a blank tab.
				r.tab, r.lost = b.tab, &lostTab{instance: b.instance, why: b.why}
			case b.instance == r.instance:
				r.tab = b.tab
			case r.instance == "":
				// Its instance is not one the engine knows (yet): the
				// executor finds the tab, or fails the task with
				// SESSION_LOST; never a new tab in its place.
				r.tab = b.tab
			}
		}
	}
	r.ctx.deadline = due
	t.run, t.timedOut = r, false
	t.attempts = append(t.attempts, Attempt{N: n, LeaseID: r.lease, InstanceID: r.instance, TabID: r.tab, AssignedAt: now})
	c.timers[timerLease].set(t, due.UnixNano())
	c.stats.observeDispatch(now.UnixNano() - t.queuedAt)
	t.agent.dispatched++
	t.agent.window.add(now)
	c.setStateAt(t, StateAssigned, reason, now)
	return r
}

// pluginRoundLocked makes a round of decisions with a fairness policy other
// than the native one: one policy call picks up to the free slots among the
// best queue heads, and the engine checks each pick against every ceiling.
func (c *core) pluginRoundLocked(now time.Time, runs []*Run) []*Run {
	// The hold stands until this round's decision ends (replaceHoldLocked).
	var next holdState
	defer c.replaceHoldLocked(&c.hold, &next)
	for len(runs) < maxPerRound {
		// Ask for no more than the lanes can take: a policy that has to
		// discard the heads of full lanes wastes the decision.
		room := 0
		for _, l := range c.lanes {
			if c.laneOpen(l, 0) {
				room += l.cfg.MaxInFlight - l.inflight
			}
		}
		slots := min(c.cfg.MaxInFlight-c.inflight, maxPerRound-len(runs), room)
		if slots <= 0 {
			return runs
		}
		cands, aqs := c.candidatesLocked(&c.scratch, now.UnixNano(), 0, nil)
		if len(cands) == 0 {
			return runs
		}
		d, ok := c.decideFairnessLocked(&c.scratch, now, cands, aqs, slots, &next)
		switch {
		case !ok:
			return runs
		case d.held:
			c.reaskLocked(d.hintMs)
			return runs // nothing from these heads now: asked again on the next change or the hint
		}
		now = d.now
		made := false
		for _, p := range d.picks {
			aq := aqs[p]
			if !aq.eligible() || !c.laneOpen(aq.lane, 0) || c.inflight >= c.cfg.MaxInFlight {
				continue
			}
			t := c.admitHeadLocked(aq, now.UnixNano())
			if t == nil {
				continue
			}
			runs = append(runs, c.assignLocked(t, c.scratch.placed, now, "dispatched"))
			made = true
		}
		if !made {
			// Every pick was blocked by a ceiling the policy cannot see; the
			// engine parked those queues, so the next call sees new heads.
			// Guard against a policy that keeps picking parked queues: fall
			// back to the native order for one decision.
			if t, _ := c.nextLocked(now.UnixNano(), 0); t != nil {
				runs = append(runs, c.assignLocked(t, c.scratch.placed, now, "dispatched"))
			} else {
				return runs
			}
		}
	}
	return runs
}

// candidatesLocked collects the heads a fairness policy chooses among: up to
// FairnessCandidates of the best queues of every open lane (by the native
// order, plus the oldest heads), sorted by head seq so the policy sees them
// in a canonical order. With only set (a pull lane a worker leases from,
// which the caller found open), of that lane alone.
func (c *core) candidatesLocked(sc *dispatchScratch, now int64, slack int, only *lane) ([]policy.Candidate, []*agentQueue) {
	k := c.cfg.FairnessCandidates
	sc.topK = sc.topK[:0]
	lanes, one := c.lanes, [1]*lane{only}
	if only != nil {
		lanes = one[:]
	}
	for _, l := range lanes {
		if only == nil && !c.laneOpen(l, slack) {
			continue
		}
		sc.topK, sc.front = l.fair.topK(k, sc.topK, sc.front)
		if l.fair.Len() > k {
			sc.topK, sc.front = l.age.topK(k/8+1, sc.topK, sc.front)
		}
	}
	slices.SortFunc(sc.topK, func(a, b *agentQueue) int {
		as, bs := a.head().seq, b.head().seq
		switch {
		case as < bs:
			return -1
		case as > bs:
			return 1
		}
		return 0
	})
	sc.topK = slices.Compact(sc.topK) // the age heap may repeat a queue
	if len(sc.topK) > k {
		sc.topK = sc.topK[:k]
	}
	sc.cands = sc.cands[:0]
	sc.agentIDs, sc.laneNames = sc.agentIDs[:0], sc.laneNames[:0]
	clear(sc.dets)
	sc.dets = sc.dets[:0]
	sc.aqs = append(sc.aqs[:0], sc.topK...)
	sc.live = c.fairness.inline
	for _, aq := range sc.aqs {
		sc.agentIDs = append(sc.agentIDs, aq.agent.id)
		sc.laneNames = append(sc.laneNames, aq.lane.cfg.Name)
		h := aq.head()
		if !c.fairness.inline && c.fairness.details {
			sc.dets = append(sc.dets, detailOf(h, ""))
		}
		a := aq.agent
		var dl int64
		if !h.spec.Deadline.IsZero() {
			dl = h.spec.Deadline.UnixMilli()
		}
		sc.cands = append(sc.cands, policy.Candidate{
			HeadSeq: h.seq, HeadRank: h.rank, HeadWaitMs: (now - h.queuedAt) / int64(time.Millisecond),
			HeadDeadlineMs: dl, HeadPriority: int32(h.spec.Priority),
			Agent: a.idx, AgentInflight: uint32(a.inflight), AgentLimit: uint32(a.limit), AgentWeight: uint32(a.weight),
			Lane: aq.lane.idx, LaneInflight: uint32(aq.lane.inflight), LaneLimit: uint32(aq.lane.cfg.MaxInFlight + slack),
			QueueLen: uint32(aq.queued),
		})
	}
	return sc.cands, sc.aqs
}

// pickLocked asks the fairness policy for picks and validates the answer; an
// invalid answer is counted and replaced by the native policy's. A policy
// may pick none (it sees no room under the candidates' ceilings, say): the
// caller then makes that decision in the native order, so dispatch never
// waits on a policy. A policy may instead hold (policy.Hold): held is then
// true with the policy's re-ask hint in milliseconds (0: none), and the
// caller dispatches nothing from these candidates.
func (c *core) pickLocked(sc *dispatchScratch, now time.Time, cands []policy.Candidate, slots int, flags uint32) (picks []uint32, hintMs int64, held bool) {
	ctx, picks := c.pickInputLocked(sc, now, slots, flags)
	n := c.fairness.p.Pick(ctx, cands, picks)
	return c.checkPicksLocked(ctx, cands, picks, n)
}

// pickInputLocked prepares a fairness decision: its context and room for
// its answer.
func (c *core) pickInputLocked(sc *dispatchScratch, now time.Time, slots int, flags uint32) (policy.PickContext, []uint32) {
	if cap(sc.picks) < slots {
		sc.picks = make([]uint32, slots)
	}
	ctx := policy.PickContext{NowMs: now.UnixMilli(), AgingMs: c.cfg.AgingThreshold.Milliseconds(), Slots: uint32(slots), Flags: flags,
		Names: candidateNames{sc}, Details: candidateNames{sc}}
	if c.cfg.AgingThreshold < 0 {
		ctx.AgingMs = 0
	}
	return ctx, sc.picks[:slots]
}

// checkPicksLocked validates a fairness answer of n picks; an invalid one is
// counted and replaced by the native policy's. A hold is returned as such,
// with its hint.
func (c *core) checkPicksLocked(ctx policy.PickContext, cands []policy.Candidate, picks []uint32, n int) ([]uint32, int64, bool) {
	if hint, ok := policy.HoldHint(n); ok {
		return nil, hint, true
	}
	valid := n >= 0 && n <= len(picks) // none is an answer: the caller goes on in the native order
	for i := 0; valid && i < n; i++ {
		valid = int(picks[i]) < len(cands)
	}
	if !valid {
		c.stats.policyInvalid++
		n = c.fallback.Pick(ctx, cands, picks)
	}
	return picks[:n], 0, false
}

// pickOutside asks a fairness policy that is not inline for picks among the
// candidates in sc, outside the driver's lock (outside): sc is the
// decision's own (c.scratch for a round of dispatch, which only the
// dispatching goroutine uses; a pull's own for a pull), which nothing else
// touches meanwhile. It reports false when the engine stopped meanwhile.
func (c *core) pickOutside(sc *dispatchScratch, now time.Time, cands []policy.Candidate, slots int) (picks []uint32, hintMs int64, held, ok bool) {
	ctx, picks := c.pickInputLocked(sc, now, slots, 0)
	p := c.fairness.p
	var n int
	c.outside(func() { n = p.Pick(ctx, cands, picks) })
	if c.closed {
		return nil, 0, false, false
	}
	picks, hintMs, held = c.checkPicksLocked(ctx, cands, picks, n)
	return picks, hintMs, held, true
}

// fairnessDecision is what a fairness policy decided among the candidates
// of a round of dispatch or of a pull (decideFairnessLocked).
type fairnessDecision struct {
	picks  []uint32 // the candidates chosen, in order; none: the caller goes on in the native order
	held   bool     // the policy held the candidates' heads: nothing from them now
	hintMs int64    // with held, when to ask again (0: at the next change)
	// now is the time the caller goes on at: the clock's after a decision
	// outside the lock, so that the events of what it applies have times
	// that follow their seqs.
	now time.Time
}

// soleHead is the decision among one candidate that a stateless policy is
// not asked about: its head. Read only.
var soleHead = []uint32{0}

// decideFairnessLocked makes one decision of a fairness policy other than
// the native one among cands (the heads of aqs) for up to slots, as a round
// of dispatch (pluginRoundLocked) and a pull (pullByPolicyLocked) each ask
// it: a stateless policy is not asked to choose among one candidate, since
// every valid answer takes its head; an inline policy decides under the
// lock; any other outside it (decide.go), on sc, which must be the
// decision's own, and the caller checks each pick as it applies it. When
// the policy holds, the hold is noted in *hold (noteHoldLocked) under the
// name of the policy that decided, which another may replace meanwhile;
// what the hold does next is the caller's. ok is false when the engine
// closed while the policy decided outside the lock: the caller applies
// nothing.
func (c *core) decideFairnessLocked(sc *dispatchScratch, now time.Time, cands []policy.Candidate, aqs []*agentQueue, slots int, hold *holdState) (d fairnessDecision, ok bool) {
	name := c.fairness.name
	d.now = now
	switch {
	case len(cands) == 1 && c.fairness.stateless:
		d.picks = soleHead
		return d, true
	case c.fairness.inline:
		d.picks, d.hintMs, d.held = c.pickLocked(sc, now, cands, slots, 0)
	default:
		if d.picks, d.hintMs, d.held, ok = c.pickOutside(sc, now, cands, slots); !ok {
			return fairnessDecision{}, false
		}
		d.now = c.now() // events' times follow their seqs
	}
	if d.held {
		c.noteHoldLocked(hold, name, aqs, d.hintMs, now)
	}
	return d, true
}

// reaskLocked asks the driver to run dispatch again after hintMs, when a
// fairness policy held with a hint; the earliest ask stands.
func (c *core) reaskLocked(hintMs int64) {
	if hintMs > 0 && (c.reaskMs == 0 || hintMs < c.reaskMs) {
		c.reaskMs = hintMs
	}
}

// armReaskLocked arms the timer that runs dispatch again after the core's
// re-ask hint (core.reaskLocked); an earlier one armed already stands.
func (e *Engine) armReaskLocked() {
	hintMs := e.reaskMs
	e.reaskMs = 0
	if hintMs <= 0 || e.reask != nil || e.closed {
		return
	}
	e.reask = e.clock.AfterFunc(time.Duration(hintMs)*time.Millisecond, func() {
		closed := false
		e.view(func(c *core) {
			e.reask = nil
			closed = c.closed
		})
		if !closed {
			e.after()
		}
	})
}

// candidateNames gives a fairness policy the names behind the candidates of
// a decision (policy.Names), copied by candidatesLocked; valid during the
// Pick call only.
type candidateNames struct{ sc *dispatchScratch }

// AgentID implements policy.Names.
func (n candidateNames) AgentID(i int) string {
	if ids := n.sc.agentIDs; i >= 0 && i < len(ids) {
		return ids[i]
	}
	return ""
}

// LaneName implements policy.Names.
func (n candidateNames) LaneName(i int) string {
	if names := n.sc.laneNames; i >= 0 && i < len(names) {
		return names[i]
	}
	return ""
}

// detail returns candidate i's details: copied for a policy that decides
// outside the lock, read live (the lock is held) for an inline one, and
// empty for one that decides outside it having said it reads none
// (policy.UsesDetails): nothing was copied, and the heads may not be read
// without the lock.
func (n candidateNames) detail(i int) recordDetail {
	if i < 0 || i >= len(n.sc.aqs) {
		return recordDetail{}
	}
	if i < len(n.sc.dets) {
		return n.sc.dets[i]
	}
	if !n.sc.live {
		return recordDetail{}
	}
	return detailOf(n.sc.aqs[i].head(), "")
}

// Session implements policy.Details.
func (n candidateNames) Session(i int) string { return n.detail(i).session }

// Labels implements policy.Details.
func (n candidateNames) Labels(i int) policy.Labels { return n.detail(i).labels }

// Agent implements policy.Details.
func (n candidateNames) Agent(i int) policy.AgentInfo { return n.detail(i).info }

// ErrorCode implements policy.Details: a fairness decision has none.
func (n candidateNames) ErrorCode(int) string { return "" }
