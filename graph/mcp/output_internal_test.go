package mcp

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
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
