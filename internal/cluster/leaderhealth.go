package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/storeerr"
	"github.com/switchyard/switchyard/plugins/manager"
)

// The leader's commit health, as the followers learn it. The leader says
// in every heartbeat (its row in the nodes table) whether its commits fail,
// and why in general terms (storeerr.Public: the row is read by every node
// and shown nowhere else, but the reason reaches the followers' clients);
// it reports at once, not at its next heartbeat, when that changes. Each
// follower reads the leader's row with the lease at its own heartbeat, so
// it knows within about a heartbeat that the leader cannot commit. Then it
// is not ready (Ready), and it refuses at once the calls it would pass to
// the leader (command), changes and reads alike, and ends those that wait
// for an answer: the leader could not make a change durable, and would
// answer late or never (its answer is a write too). A read has no other
// source: a follower's own engine holds none of the leader's state (the
// lanes' load, the counters, the registry, the plugins), so its answer is
// the error, which says why. All of it ends at the first heartbeat after
// the leader reports that it commits again. The nodes query shows the
// leader's report (Nodes: NodeStatus.CommitFailure).
//
// A leader that cannot write at all cannot say so: its heartbeats stop.
// While its lease lapses the other nodes see a usual failover (no node
// leads, then another does). A leader that still renews its lease but has
// not reported for longer than a node's heartbeat may take (three
// heartbeats and a second, after which the nodes query shows it unhealthy)
// is silent: its followers are not ready either, as they would be without
// a leader, and their calls wait for its answer, which may still come. The
// leader itself is not ready while its heartbeats fail, as a follower is.

// report is a node's account of itself in its heartbeat (nodes.health).
type report struct {
	LastSeq uint64 `json:"lastSeq"`
	Ready   bool   `json:"ready"`
	// Epoch is the lease epoch the node leads under; 0 on a follower.
	Epoch uint64 `json:"epoch,omitempty"`
	// Commits, on a leader whose commits fail, is why
	// (storeerr.Public of engine.Engine.CommitError); "" while they
	// succeed.
	Commits string `json:"commits,omitempty"`
	// CommitsSince is when this node first saw its commits fail, in the
	// run of failures Commits tells of (within a quarter heartbeat: it
	// looks that often); zero with Commits.
	CommitsSince time.Time `json:"commitsSince,omitzero"`
	// Draining, on a leader, says that its engine refuses new work
	// (engine.Engine.Draining): its followers are not ready either
	// (Node.Draining).
	Draining bool `json:"draining,omitempty"`
	// Plugins, on a leader that runs policy plugins, is what their
	// metrics show (Node.KnownPlugins); nil on a follower.
	Plugins *pluginFigures `json:"plugins,omitempty"`
}

// pluginFigures is a leader's WebAssembly policy plugins with their
// figures, as its heartbeat reports them: what /metrics shows of each
// (name, slot, stats), and nothing else (a plugin's configuration, which
// may be large, stays out of a row written every heartbeat).
type pluginFigures struct {
	List []manager.Info `json:"list"`
}

// leaderHealth is what a follower's last heartbeat learnt of the leader:
// nothing wrong (zero), its commits failing, or its silence.
type leaderHealth struct {
	node    string
	commits string // why its commits fail, as it reported
	silent  bool   // it renews its lease but has not reported for long
	// draining: its last report, of this leadership, said that it
	// refuses new work.
	draining bool
	age      time.Duration // how old its last report was, by the database's clock
	at       time.Time     // when this node read it
}

// failing reports whether the leader reported that its commits fail.
func (h leaderHealth) failing() bool { return h.commits != "" }

// since is how old the leader's last report is at now.
func (h leaderHealth) since(now time.Time) time.Duration {
	return (h.age + now.Sub(h.at)).Round(time.Millisecond)
}

// commitReport returns what this node reports of its commits: the lease
// epoch it leads under, why its commits fail and since when it has seen
// them fail, or zeros on a follower and while they succeed.
func (n *Node) commitReport() (epoch uint64, commits string, since time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	leading, e := n.leading, n.eng
	epoch = n.epoch
	if !leading || e == nil {
		n.commitsSince = time.Time{}
		return 0, "", time.Time{}
	}
	err := e.CommitError()
	if err == nil {
		n.commitsSince = time.Time{}
		return epoch, "", time.Time{}
	}
	if n.commitsSince.IsZero() {
		n.commitsSince = time.Now()
	}
	return epoch, storeerr.Public(err), n.commitsSince
}

// learnLeader derives the leader's health from the lease and the last
// report of its holder, read at now, and returns the plugins that report
// lists (nil when it lists none: a report of an earlier leadership, or of
// a leader that runs no plugins).
func (n *Node) learnLeader(rep postgres.LeaseReport, now time.Time) (leaderHealth, *pluginFigures) {
	if !rep.Held || rep.Node == n.opts.Node || !rep.Reported {
		return leaderHealth{}, nil
	}
	var r report
	_ = json.Unmarshal(rep.Health, &r)
	h := leaderHealth{node: rep.Node, age: rep.Age, at: now}
	current := r.Epoch == rep.Epoch // a report of an earlier leadership says nothing of this one
	var plugins *pluginFigures
	if current {
		plugins = r.Plugins
	}
	h.draining = current && r.Draining
	switch {
	case current && r.Commits != "":
		h.commits = r.Commits
	case rep.RenewedAt.Sub(rep.Heartbeat) > n.beatTimeout():
		h.silent = true
	case !h.draining:
		return leaderHealth{}, plugins
	}
	return h, plugins
}

// Draining reports whether the cluster's leader refuses new work, as this
// node knows it without asking anyone: its own engine's state while it
// leads; the leader's last report, read at this node's last heartbeat,
// while it follows (the leader reports at once when it starts draining, so
// a follower knows within about a heartbeat). It never waits: /readyz
// asks it (graph/server), and a load balancer's probe must be answered
// within its timeout, while the leader's own answer (Engine.Draining) may
// take a failover's time. Without a leader, nothing drains.
func (n *Node) Draining() bool {
	if l := n.leader(); l != nil {
		return l.eng.Draining(context.Background())
	}
	n.health.Lock()
	defer n.health.Unlock()
	return n.health.leader.draining
}

// KnownPlugins returns the cluster's policy plugins with their figures as
// this node knows them without asking anyone, for /metrics: a scrape must
// be answered at once, while a call to the leader may wait through a
// failover or on a leader that does not answer. While the node leads, its
// own plugin manager's list. While it follows, the WebAssembly plugins the
// leader listed in its last report (it reports them at every heartbeat),
// read at this node's last heartbeat: about two heartbeats old at most.
// Through a failover it keeps the last list it read until the new leader
// reports one; nil until it has read any.
func (n *Node) KnownPlugins(ctx context.Context) []manager.Info {
	if l := n.leader(); l != nil {
		if l.plugins == nil {
			return nil
		}
		return l.plugins.List(ctx)
	}
	n.health.Lock()
	defer n.health.Unlock()
	if n.health.plugins == nil {
		return nil
	}
	return n.health.plugins.List
}

// pluginReport returns what this node's heartbeat reports of its plugins:
// nil unless it leads with a plugin manager.
func (n *Node) pluginReport(ctx context.Context) *pluginFigures {
	l := n.leader()
	if l == nil || l.plugins == nil {
		return nil
	}
	list := l.plugins.List(ctx)
	out := &pluginFigures{List: make([]manager.Info, 0, len(list))}
	for _, p := range list {
		if !p.Native {
			out.List = append(out.List, manager.Info{Name: p.Name, Slot: p.Slot, Builtin: p.Builtin, Stats: p.Stats})
		}
	}
	return out
}

// drainReport returns whether this node leads and its engine refuses new
// work, as its heartbeat reports.
func (n *Node) drainReport() bool {
	l := n.leader()
	return l != nil && l.eng.Draining(context.Background())
}

// noteLeader records what a heartbeat learnt of the leader, wakes the
// calls that wait for it once it is known to fail its commits, and logs
// the changes.
func (n *Node) noteLeader(h leaderHealth) {
	n.health.Lock()
	was := n.health.leader
	n.health.leader = h
	if h.failing() {
		n.health.lastFailure = h
	}
	if n.health.failing == nil {
		n.health.failing = make(chan struct{})
	}
	switch {
	case h.failing() && !was.failing():
		close(n.health.failing)
	case !h.failing() && was.failing():
		n.health.failing = make(chan struct{})
	}
	n.health.Unlock()
	if n.log == nil {
		return
	}
	if h.failing() {
		n.leaderCommits.Fail(n.log, hclog.Warn, "the leader reports that its commits fail: this node is not ready and refuses changes until the leader commits again",
			"leader", h.node, "reason", h.commits)
	} else {
		n.leaderCommits.OK(n.log, "the leader commits again")
	}
	if h.silent {
		n.leaderSilent.Fail(n.log, hclog.Warn, "the leader renews its lease but has not reported its health: this node is not ready until it does",
			"leader", h.node, "for", h.since(time.Now()))
	} else {
		n.leaderSilent.OK(n.log, "the leader reports its health again")
	}
}

// leaderFailing returns, while the leader is known to fail its commits, an
// UNAVAILABLE error that says why (then the channel is nil); otherwise a
// channel closed once the leader is known to fail them.
func (n *Node) leaderFailing() (<-chan struct{}, error) {
	n.health.Lock()
	defer n.health.Unlock()
	if h := n.health.leader; h.failing() {
		return nil, errLeaderFailing(h, "try again later")
	}
	if n.health.failing == nil {
		n.health.failing = make(chan struct{})
	}
	return n.health.failing, nil
}

// errLeaderFailing answers a change that the leader h cannot commit.
func errLeaderFailing(h leaderHealth, then string) error {
	return &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Err: errors.New(h.commits),
		Message: fmt.Sprintf("the leader (%s) cannot commit; %s", h.node, then)}
}

// leaderless returns, once no node has led the cluster for longer than a
// failover takes (failover: when Ready says so too) as far as this node's
// heartbeats saw, an UNAVAILABLE error that says so and since when; nil
// otherwise. Within a failover's usual time a call waits for the next
// leader instead, which answers it as soon as it leads: a refusal then
// would only make every client retry through the election.
// What the heartbeat saw is confirmed by reading the lease: a new leader
// may have been elected since.
func (n *Node) leaderless(ctx context.Context) error {
	n.health.Lock()
	nl, known := n.health.noLeader, n.health.leaseKnown
	n.health.Unlock()
	if !known || nl.IsZero() || time.Since(nl) <= n.failover() {
		return nil
	}
	if l, err := n.store.Lease(ctx); err != nil || l.Held {
		return nil // a leader, or no answer: the call finds out
	}
	return &engine.Error{Code: engine.CodeUnavailable, Retryable: true,
		Message: fmt.Sprintf("no node leads the cluster (for %s); try again once one is elected", time.Since(nl).Round(time.Millisecond))}
}

// awaitAnswer waits for the answer to command id, as store.AwaitCommand
// does, but gives up once the leader is known to fail its commits (watch
// closes), with an UNAVAILABLE error that says why (change: the command
// changes something, which may still be applied), and once this node
// takes over (took closes; nil for a change), with errTookOver.
func (n *Node) awaitAnswer(ctx context.Context, id uint64, watch, took <-chan struct{}, change bool) (json.RawMessage, error) {
	if watch == nil && took == nil {
		return n.store.AwaitCommand(ctx, id)
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-watch:
			cancel(errGaveUp)
		case <-took:
			cancel(errTookOver)
		case <-actx.Done():
		}
	}()
	raw, err := n.store.AwaitCommand(actx, id)
	if err != nil && ctx.Err() == nil {
		switch cause := context.Cause(actx); {
		case errors.Is(cause, errTookOver):
			return nil, errTookOver
		case errors.Is(cause, errGaveUp):
			n.health.Lock()
			h := n.health.lastFailure // what made this call give up, even if the leader has recovered since
			n.health.Unlock()
			if !change {
				return nil, errLeaderFailing(h, "try again later")
			}
			return nil, errLeaderFailing(h, "the operation may still be applied when it commits again")
		}
	}
	return raw, err
}

// errGaveUp is the cause of a wait for an answer that ended because the
// leader is known to fail its commits.
var errGaveUp = errors.New("the leader cannot commit")
