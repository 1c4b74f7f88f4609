package executor

import (
	"fmt"
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
	e.poolLocked(e.owned["t1"])

	if got := e.takePooled("p", "", ""); got != "t1" {
		t.Fatalf("first take: got %q, want t1", got)
	}
	if got := e.takePooled("p", "", ""); got != "" {
		t.Fatalf("second take got %q: one pooled tab went to two attempts", got)
	}
	if n := e.ReapIdleTabs(time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("the reaper closed %d tab(s) just claimed", n)
	}

	// An attempt that cannot use the tab gives it back to the pool.
	e.unclaim("t1")
	if got := e.takePooled("p", "", "s"); got != "t1" {
		t.Fatalf("after unclaim: got %q, want t1", got)
	}
}

// The pool is a stack per instance: the most recently returned tab goes
// first, session tabs never enter it, and a pooled tab a task named (busy)
// is passed over.
func TestThePoolHandsOutTheMostRecentIdleTabOfItsInstance(t *testing.T) {
	reg := NewRegistry(RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	e, err := New(Options{Registry: reg, IdleTabTimeout: -1, MaxIdleTabs: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	for _, id := range []string{"a", "b", "c", "s"} {
		e.owned[id] = &ownedTab{instance: "p", tab: id, busy: 1}
	}
	e.owned["q"] = &ownedTab{instance: "q", tab: "q", busy: 1}
	e.owned["s"].session = "sess"
	for _, id := range []string{"a", "b", "c", "s", "q"} {
		e.done(target{tab: id})
	}
	if got := len(e.pools["p"]); got != 3 {
		t.Fatalf("instance p pools %d tabs, want 3 (the session's tab stays out)", got)
	}
	e.owned["c"].busy++ // a task named tab c
	for _, want := range []string{"b", "a", ""} {
		if got := e.takePooled("p", "", ""); got != want {
			t.Fatalf("took %q, want %q", got, want)
		}
	}
	e.done(target{tab: "c"})
	if got := e.takePooled("p", "", ""); got != "c" {
		t.Fatalf("took %q, want c, back in the pool once its task ended", got)
	}
	if got := e.takePooled("q", "", ""); got != "q" {
		t.Fatalf("instance q: took %q, want q", got)
	}
}

// BenchmarkPooledTabWithManySessionTabs takes and returns a pooled tab while
// the executor owns 10,000 session tabs: the cost must not grow with them.
func BenchmarkPooledTabWithManySessionTabs(b *testing.B) {
	reg := NewRegistry(RegistryOptions{HealthInterval: time.Hour})
	b.Cleanup(reg.Close)
	e, err := New(Options{Registry: reg, IdleTabTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	for i := range 10_000 {
		id := fmt.Sprint("s", i)
		e.owned[id] = &ownedTab{instance: "p", tab: id, session: id}
	}
	e.owned["pooled"] = &ownedTab{instance: "p", tab: "pooled", busy: 1}
	e.done(target{instance: "p", tab: "pooled"})
	b.ResetTimer()
	for b.Loop() {
		tab := e.takePooled("p", "", "")
		if tab == "" {
			b.Fatal("no pooled tab")
		}
		e.done(target{instance: "p", tab: tab})
	}
}

// A pooled tab goes only to the agent it was opened for: it holds that
// agent's last page, and on an instance with a browser context per agent,
// that agent's cookies and storage. A full pool makes room for the tab just
// released by closing its least recently used idle tab, whoever's it is.
func TestAPooledTabGoesOnlyToItsAgent(t *testing.T) {
	reg := NewRegistry(RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	e, err := New(Options{Registry: reg, IdleTabTimeout: -1, MaxIdleTabs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	e.owned["a1"] = &ownedTab{instance: "p", tab: "a1", agent: "alice", busy: 1}
	e.done(target{tab: "a1"})

	if got := e.takePooled("p", "bob", ""); got != "" {
		t.Fatalf("bob took alice's pooled tab %q", got)
	}
	if got := e.takePooled("p", "bob", "bob/s"); got != "" {
		t.Fatalf("bob's session took alice's pooled tab %q", got)
	}
	if got := len(e.pools["p"]); got != 1 {
		t.Fatalf("after bob's tries the pool holds %d tabs, want alice's 1", got)
	}
	if got := e.takePooled("p", "alice", ""); got != "a1" {
		t.Fatalf("alice took %q, want her tab a1", got)
	}
	e.done(target{tab: "a1"})

	e.owned["b1"] = &ownedTab{instance: "p", tab: "b1", agent: "bob", busy: 1}
	e.owned["b2"] = &ownedTab{instance: "p", tab: "b2", agent: "bob", busy: 1}
	e.done(target{tab: "b1"})
	e.done(target{tab: "b2"}) // the pool is full: alice's a1, least recently used, makes room
	if _, ok := e.owned["a1"]; ok {
		t.Fatal("alice's idle tab a1 is still owned: the full pool closed another")
	}
	for _, want := range []string{"b2", "b1", ""} {
		if got := e.takePooled("p", "bob", ""); got != want {
			t.Fatalf("bob took %q, want %q", got, want)
		}
	}
}
