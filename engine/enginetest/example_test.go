package enginetest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

// retryAfterBackoff is a scenario test as the harness makes it read: a
// synchronous engine on a fake clock, a memory store and a scripted
// executor; specs built fluently; attempts finished and the clock moved by
// hand. A transient failure is retried after the lane's backoff.
func retryAfterBackoff(t *testing.T) {
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("agent-1").Lane("main").High().Obj())

	// The first attempt fails with a transient error: the task waits out its
	// backoff (1 s by default) before it runs again.
	if err := h.Exec.Fail(task.ID, errors.New("instance answered 503")); err != nil {
		t.Fatal(err)
	}
	if got := h.State(task.ID); got != engine.StateRetryWait {
		t.Fatalf("after a transient failure: %s, want RETRY_WAIT", got)
	}
	h.Clock.Advance(time.Second)
	if err := h.Exec.Succeed(task.ID, `{"ok":true}`); err != nil {
		t.Fatal(err)
	}
	if got := h.State(task.ID); got != engine.StateSucceeded {
		t.Fatalf("after the second attempt: %s, want SUCCEEDED", got)
	}
}

// A test file calls its scenarios from test functions:
//
//	func TestRetryAfterBackoff(t *testing.T) { retryAfterBackoff(t) }
//
// (harness_test.go in this package runs this one.)
func Example() {}
