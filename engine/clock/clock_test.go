package clock_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The fake clock runs its calls in order of due time, and of scheduling for
// equal times, whatever order they were scheduled in; a stopped call never
// runs, and Stop reports whether it was still pending.
func TestFakeRunsCallsInOrderAndNeverAStoppedOne(t *testing.T) {
	c := clock.NewFake(epoch)
	r := rand.New(rand.NewPCG(1, 2))
	type call struct {
		due time.Duration
		seq int
	}
	var want, got []call
	var timers []clock.Timer
	for seq := range 500 {
		k := call{due: time.Duration(r.IntN(50)) * time.Second, seq: seq}
		timers = append(timers, c.AfterFunc(k.due, func() { got = append(got, k) }))
		want = append(want, k)
	}
	stopped := map[int]bool{}
	for range 100 {
		i := r.IntN(len(timers))
		if timers[i].Stop() == stopped[i] {
			t.Fatalf("Stop of call %d reported %v, having been stopped before: %v", i, !stopped[i], stopped[i])
		}
		stopped[i] = true
	}
	want = slices.DeleteFunc(want, func(k call) bool { return stopped[k.seq] })
	slices.SortStableFunc(want, func(a, b call) int { return int(a.due - b.due) })
	if n := c.Pending(); n != len(want) {
		t.Fatalf("Pending = %d, want %d", n, len(want))
	}

	c.Advance(time.Minute)
	if !slices.Equal(got, want) {
		t.Fatalf("ran %d calls in order %v, want %v", len(got), got, want)
	}
	if c.Pending() != 0 || timers[want[0].seq].Stop() {
		t.Fatal("a call that ran is still pending")
	}
	if now := c.Now(); !now.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("Now = %v after the advance, want %v", now, epoch.Add(time.Minute))
	}
}

// Step runs one due call at a time, moving the clock to its due time.
func TestFakeStepRunsOneCallAtItsDueTime(t *testing.T) {
	c := clock.NewFake(epoch)
	var ran []int
	c.AfterFunc(2*time.Second, func() { ran = append(ran, 2) })
	c.AfterFunc(time.Second, func() { ran = append(ran, 1) })
	if due, ok := c.NextDue(); !ok || !due.Equal(epoch.Add(time.Second)) {
		t.Fatalf("NextDue = %v, %v; want %v", due, ok, epoch.Add(time.Second))
	}
	if c.Step(epoch.Add(500 * time.Millisecond)) {
		t.Fatal("Step ran a call not yet due")
	}
	if !c.Step(epoch.Add(time.Hour)) || !slices.Equal(ran, []int{1}) || !c.Now().Equal(epoch.Add(time.Second)) {
		t.Fatalf("after one Step: ran %v at %v, want [1] at 1s", ran, c.Now().Sub(epoch))
	}
}

// Scheduling and running a call allocates the timer and nothing else: the
// heap of timers boxes nothing once its slice has grown.
func TestFakeAllocatesOnlyTheTimer(t *testing.T) {
	c := clock.NewFake(epoch)
	f := func() {}
	for range 64 {
		c.AfterFunc(time.Second, f)
	}
	c.Advance(time.Second)
	allocs := testing.AllocsPerRun(1000, func() {
		c.AfterFunc(time.Second, f)
		c.AfterFunc(time.Second, f).Stop()
		c.Advance(time.Second)
	})
	if allocs > 2 {
		t.Fatalf("%v allocations to schedule two calls, stop one and run the other, want 2 (the timers)", allocs)
	}
}
