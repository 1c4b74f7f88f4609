package executor

import (
	"testing"
	"time"
)

// The claim of a pooled tab happens under the lock that found it idle: a
// second taker, and the reaping of idle tabs, see it busy from that moment,
// not only once the attempt has reached use.
func TestATakenPooledTabIsBusyAtOnce(t *testing.T) {
	reg := NewRegistry(RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	e, err := New(Options{Registry: reg, IdleTabTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	e.idle = time.Minute // reap on demand only: no loop runs
	e.owned["t1"] = &ownedTab{instance: "p", tab: "t1", lastUsed: time.Now()}

	if got := e.takePooled("p", ""); got != "t1" {
		t.Fatalf("first take: got %q, want t1", got)
	}
	if got := e.takePooled("p", ""); got != "" {
		t.Fatalf("second take got %q: one pooled tab went to two attempts", got)
	}
	if n := e.ReapIdleTabs(time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("the reaper closed %d tab(s) just claimed", n)
	}

	// An attempt that cannot use the tab gives it back to the pool.
	e.unclaim("t1")
	if got := e.takePooled("p", "s"); got != "t1" {
		t.Fatalf("after unclaim: got %q, want t1", got)
	}
}
