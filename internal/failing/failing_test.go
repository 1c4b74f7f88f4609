package failing

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

func TestARunOfFailuresIsLoggedByItsChangesOfState(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &State{Every: time.Minute, now: func() time.Time { return now }}

	require.False(t, s.OK(log, "works again"), "no run to end")
	require.True(t, s.Fail(log, hclog.Warn, "heartbeat failed", "error", errors.New("down")))
	for range 50 { // an outage of 50 s, one attempt a second
		now = now.Add(time.Second)
		require.False(t, s.Fail(log, hclog.Warn, "heartbeat failed", "error", errors.New("down")))
	}
	failing, since, count := s.Failing()
	require.True(t, failing)
	require.Equal(t, 51, count)
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), since)
	now = now.Add(10 * time.Second)
	require.True(t, s.Fail(log, hclog.Warn, "heartbeat failed", "error", errors.New("down")), "a minute on: a reminder")
	now = now.Add(time.Second)
	require.True(t, s.OK(log, "heartbeat succeeds again"))
	require.False(t, s.OK(log, "heartbeat succeeds again"))
	require.True(t, s.Fail(log, hclog.Warn, "heartbeat failed", "error", errors.New("down")), "a new run")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4, buf.String())
	require.Contains(t, lines[0], "heartbeat failed: error=down")
	require.Contains(t, lines[1], "heartbeat failed (still failing): error=down for=1m0s failures=52")
	require.Contains(t, lines[2], "heartbeat succeeds again: after=1m1s failures=52")
	require.Contains(t, lines[3], "[WARN]")
}
