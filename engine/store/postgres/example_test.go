package postgres_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

// A node of a cluster: it campaigns for the leader lease; while it leads it
// admits what followers put in the inbox (the commit that writes the tasks
// deletes the items) and applies their commands; all along it reports its
// heartbeat and follows the events the leader commits. (Compiled, not run:
// it needs a database.)
func Example_node() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s, err := postgres.Open(ctx, postgres.Options{URL: "postgres://switchyard@db.internal/switchyard", Schema: "switchyard"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() //nolint:errcheck

	el, err := s.NewElector(postgres.ElectorOptions{
		Node: "node-a",
		// The store is fenced to epoch before OnElected runs; ctx ends the
		// moment the node stops leading.
		OnElected: func(ctx context.Context, epoch uint64) {
			go func() {
				for ctx.Err() == nil {
					items, err := s.TakeInbox(ctx, 100)
					if err != nil {
						continue
					}
					for _, in := range items {
						_ = in // admit in.Items through the engine, with the ids they carry
					}
					if len(items) == 0 {
						_ = s.WaitInbox(ctx)
					}
				}
			}()
		},
		OnDeposed: func(epoch uint64, reason error) {
			log.Printf("stopped leading epoch %d: %v", epoch, reason)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = el.Run(ctx) }()

	go func() {
		for ctx.Err() == nil {
			_ = s.Heartbeat(ctx, postgres.NodeInfo{ID: "node-a", Address: "10.0.0.1:8080", Role: "follower", Since: time.Now()})
			time.Sleep(2 * time.Second)
		}
	}()

	err = s.Follow(ctx, 0, func(evs []engine.Event) error {
		// publish evs to this node's subscribers
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
