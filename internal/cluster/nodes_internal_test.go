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
