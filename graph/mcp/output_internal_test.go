package mcp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
)

// A task's message says each thing once: a reason that already carries the
// error (a park's "retry budget spent: …") is not followed by it again.
func TestTaskMessageSaysEachThingOnce(t *testing.T) {
	for _, c := range []struct {
		reason, err, want string
	}{
		{"retry budget spent: timed out after 1.5s", "timed out after 1.5s", "retry budget spent: timed out after 1.5s"},
		{"cancelled", "context canceled", "cancelled: context canceled"},
		{"", "boom", "boom"},
		{"dependency X failed", "", "dependency X failed"},
	} {
		got := taskMessage(&engine.Task{State: engine.StateFailed, Reason: c.reason, Error: c.err})
		require.Equal(t, c.want, got)
	}
}

// A rate-limited call's retryAfterMs is never shorter than the wait, and
// its message names the same wait: 3.2 ms is 4 ms in both, as GraphQL says.
func TestARateLimitedCallSaysAWaitThatIsLongEnough(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want int64
		says string
	}{
		{3600 * time.Microsecond, 4, "retry in 4ms"},
		{3200 * time.Microsecond, 4, "retry in 4ms"},
		{333333333 * time.Nanosecond, 334, "retry in 334ms"},
	} {
		te := toolError(&rateLimited{name: "crawler-7", wait: c.wait})
		require.Equal(t, c.want, te.RetryAfterMs, "a wait of %s", c.wait)
		require.Contains(t, te.Message, c.says)
		require.Equal(t, c.want, auth.Error(auth.CodeRateLimited, "", c.wait).Extensions["retryAfterMs"], "as GraphQL says it")
	}
}

// A snapshot cut short says so in the text a model reads, with how many
// nodes the page has, as a text cut short does.
func TestASnapshotCutShortSaysSo(t *testing.T) {
	txt, ok := renderSnapshot([]byte(`{"url":"http://x/","title":"Huge","nodes":[{"ref":"e0","role":"button","name":"First","depth":0}],"count":1,"truncated":true,"totalNodes":200001,"source":"dom"}`))
	require.True(t, ok)
	require.Contains(t, txt, `e0 button "First"`)
	require.Contains(t, txt, "[truncated: the first 1 of 200001 nodes")
	require.Contains(t, txt, "read from its elements")

	txt, ok = renderSnapshot([]byte(`{"url":"http://x/","title":"Small","nodes":[{"ref":"e0","role":"button","name":"Go","depth":0}],"count":1}`))
	require.True(t, ok)
	require.NotContains(t, txt, "truncated")
}
