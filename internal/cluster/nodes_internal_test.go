package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/store/postgres"
)

func TestRoleOfFollowsTheLeaseNotTheLastReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reported, acquired, expired, beat := t0, t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second)
	for _, c := range []struct {
		name      string
		node      postgres.NodeInfo
		lease     postgres.Lease
		role      string
		wantSince time.Time
	}{
		{"holds the lease before it reports leading", postgres.NodeInfo{ID: "a", Role: RoleFollower, Since: reported},
			postgres.Lease{Node: "a", Held: true, AcquiredAt: acquired}, RoleLeader, acquired},
		{"holds the lease and reports it", postgres.NodeInfo{ID: "a", Role: RoleLeader, Since: reported},
			postgres.Lease{Node: "a", Held: true, AcquiredAt: acquired}, RoleLeader, acquired},
		{"a follower", postgres.NodeInfo{ID: "b", Role: RoleFollower, Since: reported},
			postgres.Lease{Node: "a", Held: true, AcquiredAt: acquired}, RoleFollower, reported},
		{"dead, its lease ran out", postgres.NodeInfo{ID: "a", Role: RoleLeader, Since: reported, Heartbeat: beat},
			postgres.Lease{Node: "a", AcquiredAt: acquired, ExpiresAt: expired}, RoleFollower, expired},
		{"dead, another took its lease", postgres.NodeInfo{ID: "a", Role: RoleLeader, Since: reported, Heartbeat: beat},
			postgres.Lease{Node: "b", Held: true, AcquiredAt: acquired}, RoleFollower, acquired},
		{"reports leading with no lease at all", postgres.NodeInfo{ID: "a", Role: RoleLeader, Since: reported, Heartbeat: beat},
			postgres.Lease{}, RoleFollower, beat},
	} {
		role, since := roleOf(c.node, c.lease)
		require.Equal(t, c.role, role, c.name)
		require.Equal(t, c.wantSince, since, c.name)
	}
}

// A follower that reaches the store is ready through a failover's usual
// time without a leader, and not ready once no node has led for longer.
func TestAFollowerIsNotReadyOnceNoNodeHasLedForLongerThanAFailover(t *testing.T) {
	n := &Node{opts: Options{TTL: 2 * time.Second, RenewEvery: 300 * time.Millisecond, Heartbeat: 300 * time.Millisecond}}
	require.NoError(t, n.Ready(), "nothing heard yet")
	now := time.Now()
	n.noteHealth(nil, postgres.LeaseReport{Lease: postgres.Lease{Node: "a", Held: true}}, now.Add(-time.Minute))
	require.NoError(t, n.Ready(), "a node leads")
	n.noteHealth(nil, postgres.LeaseReport{Lease: postgres.Lease{Node: "a"}}, now.Add(-time.Second))
	n.noteHealth(nil, postgres.LeaseReport{Lease: postgres.Lease{Node: "a"}}, now)
	require.NoError(t, n.Ready(), "a failover under way")
	n2 := &Node{opts: n.opts}
	n2.noteHealth(nil, postgres.LeaseReport{Lease: postgres.Lease{Node: "a"}}, now.Add(-n.failover()-time.Second))
	n2.noteHealth(nil, postgres.LeaseReport{Lease: postgres.Lease{Node: "a"}}, now)
	require.ErrorContains(t, n2.Ready(), "no node has led the cluster for")
	n2.noteHealth(nil, postgres.LeaseReport{Lease: postgres.Lease{Node: "b", Held: true}}, now)
	require.NoError(t, n2.Ready(), "a new leader")
}
