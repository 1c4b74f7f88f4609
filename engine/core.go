package engine

import (
	"sync"
	"time"

	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
)

// core is the engine's decision state: lanes, agents, sessions and batches;
// the queues and their heaps; every ceiling; the tasks and their state
// machine; the timers' heaps; the policies. It starts no goroutine, waits on
// no channel and calls no store. Its operations (admitLocked, roundLocked,
// pullLocked, startedLocked, finishLocked, timersDueLocked, cancelLocked…)
// record what they changed in cur, a changes value, and return the attempts
// to start; the Engine around it — the driver — owns the lock, the
// committer, the starter and the dispatcher goroutines, the real timers and
// the durability modes, runs each operation under its lock (Engine.apply)
// and applies what it recorded and returned. A policy that is not inline
// decides inside an operation without the driver's lock (outside).
//
// Methods that need nothing but this state have a *core receiver; the
// Engine embeds a core, so they are the engine's methods too.
type core struct {
	cfg   Config
	clock clock.Clock
	tabs  TabLocator // who owns a tab, for placement (Options.TabLocator)
	fleet bool       // Options.PlaceOnInstances

	lanes      []*lane
	laneByName map[string]*lane
	agents     map[string]*agent
	agentIdx   uint32
	sessions   map[string]*session
	cutoffs    map[string]time.Time // stopped sessions: refuse work submitted before
	batches    map[string]*batch
	instances  map[string]*instance
	instList   []*instance // sorted by id
	pool       limiter     // waiters for "any instance with room"
	bindings   map[string]binding
	settings   map[string][]byte
	tasks      map[string]*task
	idem       map[string]*task // agentID + "\x00" + key
	inflight   int
	queued     int
	// enqueued counts the tasks in their queues (subQueues): those a round
	// of dispatch chooses among. A QUEUED task kept out of its queue while
	// its lane's policy ranks it outside the lock (task.unranked) is not.
	enqueued int
	counts   [StateExpired + 1]int // live tasks by state

	timers [timerKinds]taskTimers

	seq       uint64
	nextLease uint64
	ids       idGen
	// cur holds the changes not yet handed to the committer: what the
	// core's operations return to the driver, which takes them whole
	// (commit.go). The batch's completion is the driver's (pendingBatch).
	cur *changes
	// span is the changes the operation under way recorded into, noted at
	// the end of each of its lock holds: one value, unless a policy decided
	// outside the lock (outside) and the driver swapped the changes out
	// between two of the operation's holds. outside keeps it on the
	// operation's own stack across the release, since other operations run
	// meanwhile. The driver answers the operation's waiters from it
	// (Engine.apply).
	span opSpan
	// reaskMs, when positive, asks the driver to run dispatch again after
	// that many milliseconds: a fairness policy held with a re-ask hint.
	reaskMs int64

	// lock is the driver's lock around the core, released while a policy
	// that is not inline decides (outside); nil when nothing else can run
	// meanwhile (a plan's or a simulation's own core). The core never takes
	// it of its own accord.
	lock sync.Locker
	// owner is what the core's runs report back to (Run.Finish, Started,
	// Extend): the Engine driving it, or a bare Core; the core only stores
	// it in the runs it makes.
	owner runOwner

	cascade []*task // terminal tasks whose dependents await the news

	scratchRank  []policy.Task
	scratchRanks []int64

	selection   namedSelection // default for lanes without their own
	retry       namedRetry
	fairness    namedFairness
	native      *fairshare.Fairness // the fast path when fairness is the built-in
	fallback    fairshare.Fairness
	scratch     dispatchScratch // the dispatching goroutine's, kept across a policy call outside the lock
	planScratch dispatchScratch // Plan's
	// planning is set while a plan is made (planLocked): a head found at
	// or past its deadline is set aside in planAside, and put back when
	// the plan is made, instead of expiring (pastDeadlineLocked).
	planning  bool
	planAside []*task
	hold      holdState  // the queues a fairness policy held at the latest decision (hold.go)
	held      []heldTask // the tasks announced held (EventHeld) whose hold has not ended yet (hold.go)

	draining bool
	closed   bool
	stats    counters
}

// runOwner is what a Run reports to: the driver of the core that made it
// (the Engine), or a Core run on its own (bare.go).
type runOwner interface {
	started(r *Run, instanceID, tabID string)
	finish(r *Run, o Outcome)
	extend(r *Run, until time.Time) (time.Time, error)
}

// init sets up the decision state of a new engine: cfg's lanes, the
// built-in policies, nothing queued.
func (c *core) init(cfg Config, clk clock.Clock, tabs TabLocator, fleet bool, seed uint64) {
	*c = core{
		cfg: cfg, clock: clk, tabs: tabs, fleet: fleet,
		laneByName: map[string]*lane{}, agents: map[string]*agent{}, sessions: map[string]*session{},
		cutoffs: map[string]time.Time{}, batches: map[string]*batch{}, instances: map[string]*instance{},
		bindings: map[string]binding{}, settings: map[string][]byte{}, tasks: map[string]*task{}, idem: map[string]*task{},
		cur:       &changes{},
		selection: namedSelection{name: priority.Name, p: priority.Selection{}, inline: true},
		retry:     namedRetry{name: backoff.Name, p: backoff.Retry{}, inline: true},
		native:    &fairshare.Fairness{},
		ids:       newIDGen(seed),
	}
	c.fairness = namedFairness{name: fairshare.Name, p: c.native, inline: true}
	for i := range c.timers {
		c.timers[i].Init(timerOrder{kind: i})
	}
	for _, lc := range cfg.Lanes {
		c.addLane(lc)
	}
}

func (c *core) addLane(lc LaneConfig) *lane {
	l := &lane{cfg: lc, idx: uint16(len(c.lanes)), selection: c.selection, retry: c.retry}
	l.selection.own, l.retry.own = false, false
	l.fair, l.age = newAQHeap(false), newAQHeap(true)
	c.lanes = append(c.lanes, l)
	c.laneByName[lc.Name] = l
	return l
}

// now returns the clock's time.
func (c *core) now() time.Time { return c.clock.Now() }

// outside runs call, a decision of a policy that is not inline, without
// the driver's lock (decide.go): the driver's other work goes on meanwhile,
// and the caller checks that the answer still fits once call returns.
func (c *core) outside(call func()) {
	if c.lock == nil {
		call()
		return
	}
	span := c.span
	span.note(c.cur) // what this hold recorded is in cur now, before the driver can swap it out
	c.lock.Unlock()
	call()
	c.lock.Lock()
	c.span = span
}

// opSpan is the changes one operation recorded into (core.span), latest
// last.
type opSpan struct {
	last    *changes
	earlier []*changes // rare: only when the changes were swapped out while a policy decided outside the lock
}

// note records that the operation's lock hold ending now may have recorded
// into cur: it did if cur holds anything (cur may hold other operations'
// changes too; waiting for those as well costs nothing). An empty cur adds
// nothing.
func (s *opSpan) note(cur *changes) {
	if cur == nil || cur.empty() || s.last == cur {
		return
	}
	if s.last != nil {
		s.earlier = append(s.earlier, s.last)
	}
	s.last = cur
}
