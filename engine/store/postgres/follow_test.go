package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// follower runs Follow in the background and collects what it delivers.
type follower struct {
	mu   sync.Mutex
	seqs []uint64
	stop context.CancelFunc
	done chan error
}

func follow(t *testing.T, s *postgres.Store, after uint64) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	f := &follower{stop: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- s.Follow(ctx, after, func(evs []engine.Event) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, e := range evs {
				f.seqs = append(f.seqs, e.Seq)
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-f.done, context.Canceled)
	})
	return f
}

func (f *follower) got() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint64(nil), f.seqs...)
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestFollowDeliversEveryEventOnceAcrossReconnectsAndLostNotifications(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	leader := openStore(t, schema)
	// A poll interval longer than the test: only notifications (and the
	// listener's reconnection) wake the follower, except where said.
	fs := openStore(t, schema, func(o *postgres.Options) { o.PollInterval = time.Minute })
	f := follow(t, fs, 0)
	waitfor.Eventually(t, "the follower listens", func() bool { return fs.ListenerPID() != 0 })

	seq := uint64(1)
	commit := func(n int) {
		require.NoError(t, leader.Commit(bg, taskBatch(seq, n)))
		seq += uint64(n)
	}
	for range 10 {
		commit(5)
	}
	waitfor.Eventually(t, "woken by notifications", func() bool { return len(f.got()) == 50 })

	// The listener's connection is killed: what is committed meanwhile is
	// read when it reconnects.
	pid := fs.ListenerPID()
	admin(t, "SELECT pg_terminate_backend($1)", int32(pid))
	for range 10 {
		commit(3)
	}
	waitfor.Eventually(t, "the listener reconnects", func() bool { return fs.ListenerPID() != 0 && fs.ListenerPID() != pid })
	waitfor.Eventually(t, "80 events followed", func() bool { return len(f.got()) == 80 })

	// Commits that notify nobody are found at the next notification.
	leader.SetNoNotify(true)
	commit(7)
	commit(1)
	leader.SetNoNotify(false)
	commit(2)
	waitfor.Eventually(t, "90 events followed", func() bool { return len(f.got()) == 90 })
	require.Equal(t, seqRange(1, 90), f.got(), "every event once, in seq order")

	// A second follower that starts late reads from where it says.
	late := follow(t, fs, 85)
	waitfor.Eventually(t, "the late follower has 5 events", func() bool { return len(late.got()) == 5 })
	require.Equal(t, seqRange(86, 90), late.got())
}

func TestFollowPollsWhenNothingIsNotified(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	leader := openStore(t, schema)
	leader.SetNoNotify(true)
	fs := openStore(t, schema, func(o *postgres.Options) { o.PollInterval = 100 * time.Millisecond })
	f := follow(t, fs, 0)
	waitfor.Eventually(t, "the follower listens", func() bool { return fs.ListenerPID() != 0 })
	require.NoError(t, leader.Commit(bg, taskBatch(1, 4)))
	require.NoError(t, leader.Commit(bg, taskBatch(5, 1)))
	waitfor.Eventually(t, "the poll finds what no notification announced", func() bool { return len(f.got()) == 5 })
	require.Equal(t, seqRange(1, 5), f.got())
}

func TestFollowReturnsTheCallbacksError(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	require.NoError(t, s.Commit(bg, taskBatch(1, 3)))
	stop := errors.New("enough")
	var seen []uint64
	err := s.Follow(bg, 1, func(evs []engine.Event) error {
		for _, e := range evs {
			seen = append(seen, e.Seq)
		}
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, []uint64{2, 3}, seen)
}
