package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/waitfor"
)

var bg = context.Background()

// leadership records an elector's callbacks.
type leadership struct {
	mu     sync.Mutex
	events []leaderEvent
}

type leaderEvent struct {
	node    string
	elected bool
	epoch   uint64
	reason  error
	at      time.Time
	ctx     context.Context
}

func (l *leadership) options(node string, ttl, renew, margin time.Duration) postgres.ElectorOptions {
	return postgres.ElectorOptions{Node: node, TTL: ttl, RenewEvery: renew, Margin: margin,
		OnElected: func(ctx context.Context, epoch uint64) {
			l.add(leaderEvent{node: node, elected: true, epoch: epoch, at: time.Now(), ctx: ctx})
		},
		OnDeposed: func(epoch uint64, reason error) {
			l.add(leaderEvent{node: node, epoch: epoch, reason: reason, at: time.Now()})
		},
	}
}

func (l *leadership) add(e leaderEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *leadership) list() []leaderEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leaderEvent(nil), l.events...)
}

// find returns the first event that matches.
func (l *leadership) find(node string, elected bool) (leaderEvent, bool) {
	for _, e := range l.list() {
		if e.node == node && e.elected == elected {
			return e, true
		}
	}
	return leaderEvent{}, false
}

// runElector runs an elector until the test ends.
func runElector(t *testing.T, s *postgres.Store, o postgres.ElectorOptions) *postgres.Elector {
	t.Helper()
	e, err := s.NewElector(o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return e
}

func leaders(es []*postgres.Elector) []int {
	var out []int
	for i, e := range es {
		if _, ok := e.Leading(); ok {
			out = append(out, i)
		}
	}
	return out
}

func TestOneLeaderAtATimeAndResignHandsOver(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	var log leadership
	var es []*postgres.Elector
	for i := range 3 {
		s := openStore(t, schema)
		// A long TTL: a handover within it can only come from the resignation.
		es = append(es, runElector(t, s, log.options(fmt.Sprintf("node-%d", i), 20*time.Second, time.Second, 5*time.Second)))
	}
	// Never two leaders: the log of elections at the end holds exactly one
	// per epoch, in order, over the whole test.
	waitfor.Eventually(t, "one node leads", func() bool { return len(leaders(es)) == 1 })
	first := leaders(es)[0]
	epoch1, _ := es[first].Leading()
	lease, err := openStore(t, schema).Lease(bg)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("node-%d", first), lease.Node)
	require.Equal(t, epoch1, lease.Epoch)
	require.True(t, lease.Held)

	es[first].Resign()
	waitfor.Eventually(t, "another node takes over after the leader resigns, well within the TTL", func() bool {
		l := leaders(es)
		return len(l) == 1 && l[0] != first
	})
	second := leaders(es)[0]
	epoch2, _ := es[second].Leading()
	require.Greater(t, epoch2, epoch1, "the epoch grows at each takeover")
	// Leading turns true before OnElected runs: callbacks run on the
	// elector's own goroutine. Wait for the callback, not for the flag.
	waitfor.Eventually(t, "the new leader's OnElected runs", func() bool { _, ok := log.find(fmt.Sprintf("node-%d", second), true); return ok })

	waitfor.Eventually(t, "the old leader's OnDeposed runs", func() bool { _, ok := log.find(fmt.Sprintf("node-%d", first), false); return ok })
	dep, _ := log.find(fmt.Sprintf("node-%d", first), false)
	require.ErrorIs(t, dep.reason, postgres.ErrResigned)
	el, _ := log.find(fmt.Sprintf("node-%d", first), true)
	require.Error(t, el.ctx.Err(), "the leadership context ends with the leadership")

	var epochs []uint64
	for _, e := range log.list() {
		if e.elected {
			epochs = append(epochs, e.epoch)
		}
	}
	require.Equal(t, []uint64{epoch1, epoch2}, epochs, "each epoch is elected once, in order")
}

func TestPartitionedLeaderStepsDownBeforeAnotherTakesOver(t *testing.T) {
	t.Parallel()
	// The margin is how late the cut-off leader's own deadline may fire and
	// still step down before its lease expires: under the race detector on
	// a busy machine a timer may fire most of a second late.
	const ttl, renew, margin = 3 * time.Second, 200 * time.Millisecond, 1500 * time.Millisecond
	schema := newSchema(t)
	var log leadership
	var cut cutter
	sa := openStore(t, schema, withCutter(&cut))
	sb := openStore(t, schema)
	ea := runElector(t, sa, log.options("a", ttl, renew, margin))
	waitfor.Eventually(t, "a leads", func() bool { _, ok := ea.Leading(); return ok })
	epochA, _ := ea.Leading()
	require.NoError(t, sa.Commit(bg, taskBatch(1, 2)), "the leader commits under its epoch")
	eb := runElector(t, sb, log.options("b", ttl, renew, margin))

	cut.Partition()
	before, err := sb.Lease(bg)
	require.NoError(t, err)
	require.Equal(t, "a", before.Node)

	waitfor.Eventually(t, "b takes over within three TTLs", func() bool { _, ok := eb.Leading(); return ok })
	epochB, _ := eb.Leading()
	require.Equal(t, epochA+1, epochB)
	after, err := sb.Lease(bg)
	require.NoError(t, err)
	require.Equal(t, "b", after.Node)
	took := after.AcquiredAt.Sub(before.RenewedAt)
	t.Logf("takeover %s after the last renewal (ttl %s, renew every %s)", took, ttl, renew)
	require.GreaterOrEqual(t, took, ttl, "nobody takes a lease before it expires")
	require.LessOrEqual(t, took, ttl+renew+time.Second, "takeover within TTL + the renew interval (and scheduling slack)")

	dep, ok := log.find("a", false)
	require.True(t, ok, "a stepped down")
	require.ErrorIs(t, dep.reason, postgres.ErrTrustExpired)
	require.True(t, dep.at.Before(before.ExpiresAt), "a stepped down (%s) before its lease expired (%s)", dep.at, before.ExpiresAt)
	elB, _ := log.find("b", true)
	require.True(t, dep.at.Before(elB.at), "a stepped down before b was elected")
	_, aLeads := ea.Leading()
	require.False(t, aLeads)

	// The network heals: a's store is fenced, whatever it believes.
	cut.Heal()
	err = sa.Commit(bg, taskBatch(3, 1))
	require.ErrorIs(t, err, postgres.ErrNotLeader)
	require.ErrorIs(t, err, engine.ErrFenced, "the engine can tell the refusal is permanent")
	sa.SetFence("a", epochA) // as if a's process had been paused through all of it
	err = sa.Commit(bg, taskBatch(3, 1))
	require.ErrorIs(t, err, postgres.ErrNotLeader, "the database refuses the old epoch")
	_, err = sb.Task(bg, "T00000003")
	require.ErrorIs(t, err, engine.ErrNotFound, "a refused commit writes nothing")
	require.NoError(t, sb.Commit(bg, taskBatch(3, 1)), "the new leader commits")
	_, stillB := eb.Leading()
	require.True(t, stillB)
}

func TestFencedCommitWritesNothingOnceTheLeaseMoves(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	lease := pgxIdent(schema) + ".leases"
	admin(t, "INSERT INTO "+lease+" (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 7, now(), now(), now() + interval '1 hour')")
	s.SetFence("a", 7)
	require.NoError(t, s.Commit(bg, taskBatch(1, 1)), "a commit under the held epoch")
	snap, err := s.Load(bg)
	require.NoError(t, err)

	for _, c := range []struct{ name, sql string }{
		{"taken over", "UPDATE " + lease + " SET node = 'b', epoch = 8"},
		{"expired", "UPDATE " + lease + " SET node = 'a', epoch = 7, expires_at = now() - interval '1 second'"},
		{"re-taken by the same node under a new epoch", "UPDATE " + lease + " SET node = 'a', epoch = 9, expires_at = now() + interval '1 hour'"},
	} {
		name := c.name
		admin(t, c.sql)
		b := taskBatch(2, 3)
		b.Lanes = []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}
		b.Settings = []engine.Setting{{Key: "k", Value: []byte("v")}}
		err := s.Commit(bg, b)
		require.ErrorIs(t, err, postgres.ErrNotLeader, "lease %s", name)
		got, err := s.Load(bg)
		require.NoError(t, err)
		require.Equal(t, snap, got, "lease %s: the refused commit wrote nothing", name)
	}
	s.SetFence("a", 9)
	require.NoError(t, s.Commit(bg, taskBatch(2, 3)), "the node's new epoch writes")
}

func TestElectorOptionsAreChecked(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	for _, o := range []postgres.ElectorOptions{
		{},
		{Node: "a\x00b"},
		{Node: "a", TTL: time.Second, RenewEvery: time.Second},
		{Node: "a", TTL: time.Second, Margin: 2 * time.Second},
		{Node: "a", TTL: 10 * time.Second, RenewEvery: 8 * time.Second, Margin: 3 * time.Second},
	} {
		_, err := s.NewElector(o)
		require.Error(t, err, "%+v", o)
	}
	_, err := s.NewElector(postgres.ElectorOptions{Node: "a"})
	require.NoError(t, err, "the defaults are consistent")
}

// A leader that steps down gives the lease up at once and stays in the
// election: its leadership ends as a lost one does (OnDeposed with
// ErrSteppedDown, the leadership context cancelled, the store fenced), the
// other node takes the lease well within its TTL, and once the backoff has
// passed the node that stepped down campaigns again and, the lease free,
// leads under a new epoch.
func TestStepDownReleasesTheLeaseAndCampaignsAgainAfterTheBackoff(t *testing.T) {
	t.Parallel()
	// A long TTL: a handover within it can only come from a release. The
	// backoff is long enough for the other node to take the released lease
	// first on a busy machine.
	const ttl, renew, margin, backoff = 30 * time.Second, 200 * time.Millisecond, 5 * time.Second, 8 * time.Second
	schema := newSchema(t)
	var log leadership
	sa, sb := openStore(t, schema), openStore(t, schema)
	ea := runElector(t, sa, log.options("a", ttl, renew, margin))
	waitfor.Eventually(t, "a leads", func() bool { _, ok := ea.Leading(); return ok })
	epochA, _ := ea.Leading()
	waitfor.Eventually(t, "a's OnElected runs", func() bool { _, ok := log.find("a", true); return ok })
	eb := runElector(t, sb, log.options("b", ttl, renew, margin))

	steppedDown := time.Now()
	ea.StepDown(epochA, backoff)
	waitfor.Eventually(t, "b takes the released lease", func() bool { _, ok := eb.Leading(); return ok })
	epochB, _ := eb.Leading()
	require.Equal(t, epochA+1, epochB)
	_, aLeads := ea.Leading()
	require.False(t, aLeads)
	waitfor.Eventually(t, "a's OnDeposed runs", func() bool { _, ok := log.find("a", false); return ok })
	dep, _ := log.find("a", false)
	require.Equal(t, epochA, dep.epoch)
	require.ErrorIs(t, dep.reason, postgres.ErrSteppedDown)
	el, _ := log.find("a", true)
	require.Error(t, el.ctx.Err(), "the leadership context ends with the leadership")
	err := sa.Commit(bg, taskBatch(1, 1))
	require.ErrorIs(t, err, postgres.ErrNotLeader, "a's store is fenced")
	require.NoError(t, sb.Commit(bg, taskBatch(1, 1)), "the new leader commits")

	// b steps down for longer than the test lasts: a, still campaigning,
	// takes the lease once its own backoff has passed.
	eb.StepDown(epochB, time.Hour)
	waitfor.Eventually(t, "a leads again", func() bool { ep, ok := ea.Leading(); return ok && ep > epochB })
	epochA2, _ := ea.Leading()
	require.Equal(t, epochB+1, epochA2)
	var again leaderEvent
	waitfor.Eventually(t, "a's second OnElected runs", func() bool {
		for _, e := range log.list() {
			if e.node == "a" && e.elected && e.epoch == epochA2 {
				again = e
				return true
			}
		}
		return false
	})
	require.GreaterOrEqual(t, again.at.Sub(steppedDown), backoff, "a campaigned again only after its backoff")
	require.NoError(t, sa.Commit(bg, taskBatch(2, 1)), "a commits under its new epoch")
	dep, _ = log.find("b", false)
	require.ErrorIs(t, dep.reason, postgres.ErrSteppedDown)
}
