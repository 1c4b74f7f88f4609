package waitfor_test

import (
	"errors"
	"sync/atomic"
	"testing"

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
