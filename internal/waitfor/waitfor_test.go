package waitfor_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	waitfor.Eventually(t, "the third poll", func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

func TestCheckForReturnsOnceTheCheckPasses(t *testing.T) {
	var n atomic.Int32
	waitfor.CheckFor(t, func() error {
		if n.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if got := n.Load(); got != 3 {
		t.Fatalf("checked %d times, want 3", got)
	}
}

// A check that never passes fails the test once its bound has passed, with
// the bound and the check's last error.
func TestCheckForWithinFailsWithTheLastErrorAfterItsBound(t *testing.T) {
	var r recorder
	start := time.Now()
	n := 0
	waitfor.CheckForWithin(&r, 50*time.Millisecond, func() error {
		n++
		return fmt.Errorf("check %d", n)
	})
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its bound", took)
	}
	want := fmt.Sprintf("not so after 50ms: check %d", n)
	if !r.failed || r.msg != want {
		t.Fatalf("failed %v with %q, want %q", r.failed, r.msg, want)
	}
}

func TestEventuallyWithinNamesWhatItWaitedFor(t *testing.T) {
	var r recorder
	waitfor.EventuallyWithin(&r, 10*time.Millisecond, "pigs fly", func() bool { return false })
	if want := "not so after 10ms: still waiting until pigs fly"; !r.failed || r.msg != want {
		t.Fatalf("failed %v with %q, want %q", r.failed, r.msg, want)
	}
}

// recorder is a testing.TB whose Fatalf records the failure; CheckFor
// returns after it, as the recorder does not stop the goroutine.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}
