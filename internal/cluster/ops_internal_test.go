package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// TestOperationsOnAPartTheLeaderRunsWithoutAreUnavailable: a leader may run
// without a plugin manager, schedules or heartbeat checks; every operation
// on one it lacks answers UNAVAILABLE, saying which, and touches nothing.
func TestOperationsOnAPartTheLeaderRunsWithoutAreUnavailable(t *testing.T) {
	want := map[string]string{
		"plugins.":    "the leader runs no plugin manager",
		"schedules.":  "the leader runs no schedules",
		"heartbeats.": "the leader runs no heartbeat checks",
	}
	seen := map[string]int{}
	for kind, h := range newHandlers() {
		for prefix, msg := range want {
			if !strings.HasPrefix(kind, prefix) {
				continue
			}
			seen[prefix]++
			out, err := h(context.Background(), &leader{}, json.RawMessage(`{}`))
			require.Nil(t, out, kind)
			var e *engine.Error
			require.ErrorAs(t, err, &e, kind)
			require.Equal(t, engine.CodeUnavailable, e.Code, kind)
			require.Equal(t, msg, e.Message, kind)
		}
	}
	require.Equal(t, map[string]int{"plugins.": 9, "schedules.": 7, "heartbeats.": 6}, seen)
}
