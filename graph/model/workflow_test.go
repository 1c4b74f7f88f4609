package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

// A plugin's state is its breaker's, one for one; the end of a quarantine
// shows only while it is quarantined.
func TestPluginStateIsTheBreakersState(t *testing.T) {
	until := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		st   host.State
		want PluginState
	}{
		{host.StateActive, PluginStateActive},
		{host.StateProbation, PluginStateProbation},
		{host.StateQuarantined, PluginStateQuarantined},
		{host.StateDisabled, PluginStateDisabled},
	} {
		p := &Plugin{I: manager.Info{Stats: host.Stats{State: c.st, Until: until, Reason: "why"}}}
		require.Equal(t, c.want, p.State(), c.st.String())
		require.True(t, p.State().IsValid())
		if c.st == host.StateQuarantined {
			require.NotNil(t, p.QuarantinedUntil())
			require.True(t, until.Equal(*p.QuarantinedUntil()))
		} else {
			require.Nil(t, p.QuarantinedUntil(), c.st.String())
		}
	}
	require.Equal(t, PluginStateActive, (&Plugin{I: manager.Info{Native: true}}).State(), "a native policy is always active")
	require.Nil(t, (&Plugin{}).DisabledReason())
}
