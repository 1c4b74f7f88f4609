package mcp

import "time"

// SessionState returns how many MCP sessions the server keeps (live) and
// how many browser session keys (keys), for the tests.
func (s *Server) SessionState() (live, keys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live), len(s.sessions)
}

// SetSession exposes setSession to the tests.
func (s *Server) SetSession(mcpID, key string) { s.setSession(mcpID, key) }

// CheckSelector exposes checkSelector to the tests.
func CheckSelector(field, sel string) error { return checkSelector(field, sel) }

// SendCancelledAnswers makes the servers built during the test answer the
// calls their clients cancel, as when the answer leaves before the
// cancellation arrives. The test must not be parallel.
func SendCancelledAnswers(t interface{ Cleanup(func()) }) {
	withholdCancelled = false
	t.Cleanup(func() { withholdCancelled = true })
}

// SetProgressEvery makes the servers built during the test report a
// waiting call's progress every d. The test must not be parallel.
func SetProgressEvery(t interface{ Cleanup(func()) }, d time.Duration) {
	progressEvery = d
	t.Cleanup(func() { progressEvery = ProgressEvery })
}

// SessionClosedReason is the reason of a task whose MCP session was
// terminated while its call waited.
const SessionClosedReason = sessionClosedReason

// SDKSessions returns how many sessions the SDK's server holds.
func (s *Server) SDKSessions() int {
	n := 0
	for range s.mcp.Sessions() {
		n++
	}
	return n
}
