package postgres

// Events across nodes. The leader's commits notify the last committed seq;
// a follower reads the events (eventsSelectSQL: the events table and the
// first events in tasks' rows, in one statement and so one snapshot) after
// the seq it has delivered, on each notification, after each reconnection
// of the listener and at least every poll interval. Commits are serialised
// on one row lock and become visible in seq order, so reading "seq > last
// delivered" never skips an event that a later read could reveal.

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/failing"
)

// followPage bounds one read of the events.
const followPage = 1000

// Follow delivers every committed event with a seq above after to fn, in
// seq order, each exactly once, until ctx ends (it returns ctx's error) or
// fn returns an error (it returns that error). fn is called from Follow's
// goroutine, with slices it may keep. A failed read is logged and retried
// at the next wake-up: Follow outlives database outages.
func (s *Store) Follow(ctx context.Context, after uint64, fn func([]engine.Event) error) error {
	w := s.hub.subscribe(s.channels.events)
	defer s.hub.unsubscribe(w)
	var reads failing.State // an outage logs its start and end, not each poll
	for {
		for {
			evs, err := s.events(ctx, after, followPage, nil)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if s.closed() {
					return errClosed
				}
				reads.Fail(s.log, hclog.Warn, "follow: reading events failed; retrying, the next failures are not logged until a read succeeds",
					"seq", after, "error", err)
				break
			}
			reads.OK(s.log, "follow: reading events succeeds again", "seq", after)
			if len(evs) == 0 {
				break
			}
			if err := fn(evs); err != nil {
				return err
			}
			after = evs[len(evs)-1].Seq
			if len(evs) < followPage {
				break
			}
		}
		if err := s.hub.wait(ctx, w); err != nil {
			return err
		}
	}
}
