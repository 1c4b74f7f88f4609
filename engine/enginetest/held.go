package enginetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/switchyard/switchyard/engine"
)

// HeldStore is a durable store whose commits can be held at a gate and let
// through one at a time or all at once: for tests of what a reader is shown
// while a change is recorded in the engine's memory but not yet committed.
// It also keeps a record of tasks handed out ahead of what it has committed
// (Check), so that a test can wrap the engine an API reads from and assert
// that nothing uncommitted got out.
//
// It wraps any store and says it is durable (so that the engine waits for
// its commits even over a memory store). A wrapped PipelinedStore's
// CommitAsync is hidden: every commit passes the gate.
type HeldStore struct {
	engine.Store
	passes chan struct{} // a commit held at the gate takes one to go on

	mu          sync.Mutex
	holding     bool
	arrived     int // commits that reached the gate
	let         int // passes handed out
	uncommitted []string
}

// NewHeldStore wraps st; its commits pass until Hold.
func NewHeldStore(st engine.Store) *HeldStore {
	return &HeldStore{Store: st, passes: make(chan struct{}, 1024)}
}

// Durable reports true: the engine waits for a held commit as for any
// durable one.
func (s *HeldStore) Durable() bool { return true }

// Commit waits at the gate while commits are held, then commits b.
func (s *HeldStore) Commit(ctx context.Context, b *engine.Batch) error {
	s.mu.Lock()
	held := s.holding
	if held {
		s.arrived++
	}
	s.mu.Unlock()
	if held {
		<-s.passes
	}
	return s.Store.Commit(ctx, b)
}

// Hold makes the commits from now on wait at the gate.
func (s *HeldStore) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = true
}

// Waiting is how many commits wait at the gate.
func (s *HeldStore) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrived - s.let
}

// LetOne lets the first commit waiting at the gate (or the next to arrive)
// through.
func (s *HeldStore) LetOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.let++
	s.passes <- struct{}{}
}

// Open lets every commit through, from now on too. Register it as a
// cleanup before the engine's shutdown (t.Cleanup runs last first), so
// that the engine's last commit is not held.
func (s *HeldStore) Open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding = false
	for ; s.let < s.arrived; s.let++ {
		s.passes <- struct{}{}
	}
}

// Committed returns task id as the store has committed it.
func (s *HeldStore) Committed(t testing.TB, id string) *engine.Task {
	t.Helper()
	st, err := s.Store.Task(context.Background(), id)
	if err != nil {
		t.Fatalf("the store has no task %s: %v", id, err)
	}
	return st
}

// Check records t when the store has not committed it as far as it shows
// (its latest event, and a retry's link, which no event records): a state
// a crash would roll back. A nil t is no task.
func (s *HeldStore) Check(t *engine.Task) {
	if t == nil {
		return
	}
	st, err := s.Store.Task(context.Background(), t.ID)
	if err == nil && st.LastSeq >= t.LastSeq && (t.RetryOf == "" || st.RetryOf == t.RetryOf) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.uncommitted = append(s.uncommitted, fmt.Sprintf("task %s %s handed out while the store has no such task (%v)", t.ID, t.State, err))
		return
	}
	s.uncommitted = append(s.uncommitted, fmt.Sprintf("task %s %s (seq %d, retryOf %q) handed out while the store has %s (seq %d, retryOf %q)",
		t.ID, t.State, t.LastSeq, t.RetryOf, st.State, st.LastSeq, st.RetryOf))
}

// Uncommitted returns what Check recorded: every task handed out ahead of
// the store.
func (s *HeldStore) Uncommitted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.uncommitted...)
}
