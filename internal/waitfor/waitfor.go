// Package waitfor is how tests wait for something that happens in the
// background: they poll a condition until it holds, and fail with what they
// were waiting for when it does not hold in time. The time allowed is long,
// because CI runs on a busy machine; a test that passes never waits it out.
//
// Waiting is for what must happen. That something did not happen is shown
// by a signal or a deterministic clock, never by waiting and seeing nothing.
package waitfor

import (
	"testing"
	"time"
)

// Timeout is how long Eventually and CheckFor wait before failing the test.
const Timeout = 30 * time.Second

// Eventually polls cond until it returns true, and fails t (naming what it
// waited for) if Timeout passes first.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	CheckFor(t, func() error {
		if cond() {
			return nil
		}
		return errNotYet{what}
	})
}

// EventuallyWithin is Eventually with its own bound, for what may take
// longer than Timeout on a busy machine (a cluster's failover under the race
// detector, a long backlog to drain). The bound is how long the test may
// wait, never what it asserts: a test that asserts how soon something
// happens measures it.
func EventuallyWithin(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	CheckForWithin(t, bound, func() error {
		if cond() {
			return nil
		}
		return errNotYet{what}
	})
}

// CheckFor polls check until it returns nil, and fails t with check's last
// error if Timeout passes first.
func CheckFor(t testing.TB, check func() error) {
	t.Helper()
	CheckForWithin(t, Timeout, check)
}

// CheckForWithin is CheckFor with its own bound (see EventuallyWithin).
func CheckForWithin(t testing.TB, bound time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	pause := time.Millisecond
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not so after %v: %v", bound, err)
			return // for a testing.TB whose Fatalf returns
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

type errNotYet struct{ what string }

func (e errNotYet) Error() string { return "still waiting until " + e.what }
