package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

// A node of a cluster: it campaigns for the leader lease; while it leads it
// applies the commands other nodes send it (submissions, cancels, …) and
// answers each; all along it reports its heartbeat and follows the events
// the leader commits. (Compiled, not run: it needs a database.)
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
					cmds, err := s.TakeCommands(ctx, 100)
					if err != nil || len(cmds) == 0 {
						_ = s.WaitCommands(ctx) // woken by a new command, or after the poll interval
						continue
					}
					for _, c := range cmds {
						// Apply c.Kind with c.Payload through the engine (a
						// submission keeps the task ids it carries), then
						// answer: the submitting node's AwaitCommand returns
						// the result, or the error as a *CommandError. A
						// command left unanswered is applied again by the
						// next leader.
						_ = s.CompleteCommand(ctx, c.ID, json.RawMessage(`{"ok":true}`), nil)
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
