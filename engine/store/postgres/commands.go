package postgres

// Commands: how a follower reaches the leader. A follower does not forward
// work through itself: it writes a command to a table and notifies the
// leader. Submissions travel this way too, with the task ids the follower
// chose, so that applying one again yields the same tasks.
//
// A command (submit tasks, cancel a task, update a lane, set a policy, …) is
// opaque JSON the caller defines. The leader takes it, applies it and
// completes it with a result or an error; the submitting follower waits in
// AwaitCommand, woken by a notification. A leader that dies between applying
// a command and completing it leaves the command to its successor: commands
// are applied at least once, so they should be idempotent.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/engine"
)

// takenState is the leader's record of the commands it took and has not
// completed (guarded by Store.wmu): a taken command is not handed out again
// until the fence moves to another epoch.
type takenState struct {
	cmdTaken map[uint64]struct{}
}

func (s *Store) forgetTakenLocked() {
	s.cmdTaken = map[uint64]struct{}{}
}

// Command is a request from a node to the leader.
type Command struct {
	ID        uint64
	Node      string // the node that submitted it
	Kind      string
	Payload   json.RawMessage
	CreatedAt time.Time
}

// CommandError is a command's failure, as the leader reported it.
type CommandError struct {
	ID      uint64
	Message string
}

func (e *CommandError) Error() string { return fmt.Sprintf("command %d failed: %s", e.ID, e.Message) }

// SubmitCommand writes a command for the leader, notifies it and returns the
// command's id. payload must be JSON.
func (s *Store) SubmitCommand(ctx context.Context, node, kind string, payload json.RawMessage) (uint64, error) {
	if !json.Valid(payload) {
		return 0, fmt.Errorf("postgres store: command %s: the payload is not JSON", kind)
	}
	pb := &pgx.Batch{}
	pb.Queue("INSERT INTO commands (node, kind, payload) VALUES ($1, $2, $3) RETURNING id", node, kind, []byte(payload))
	pb.Queue("SELECT pg_notify($1, '')", s.channels.commands)
	br := s.pool.SendBatch(ctx, pb)
	var id int64
	err := br.QueryRow().Scan(&id)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, s.describe("submit command "+kind, err)
	}
	return uint64(id), nil
}

// TakeCommands returns up to limit of the oldest pending commands this store
// has not handed out yet. Meant for the leader, from one goroutine.
func (s *Store) TakeCommands(ctx context.Context, limit int) ([]Command, error) {
	if limit <= 0 {
		return nil, nil
	}
	s.watchLeaderTopics()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.syncEpochLocked(ctx); err != nil {
		return nil, s.describe("take commands", err)
	}
	taken := make([]int64, 0, len(s.cmdTaken))
	for id := range s.cmdTaken {
		taken = append(taken, int64(id))
	}
	rows, err := s.pool.Query(ctx, `SELECT id, node, kind, payload, created_at FROM commands
		WHERE done_at IS NULL AND id <> ALL($1::bigint[]) ORDER BY id LIMIT $2`, taken, int64(limit))
	if err != nil {
		return nil, s.describe("take commands", err)
	}
	var out []Command
	var c Command
	var id int64
	var payload []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &c.Node, &c.Kind, &payload, &c.CreatedAt}, func() error {
		c.ID, c.Payload = uint64(id), json.RawMessage(payload)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, s.describe("take commands", err)
	}
	for _, c := range out {
		s.cmdTaken[c.ID] = struct{}{}
	}
	return out, nil
}

// WaitCommands blocks until there may be new commands, or ctx ends.
func (s *Store) WaitCommands(ctx context.Context) error {
	s.watchLeaderTopics()
	return s.hub.wait(ctx, s.leaderWaiters.commands)
}

// CompleteCommand records a command's outcome, a result (JSON, or nil) or
// an error, and wakes the node waiting for it. Under a fence, only the
// leader can; a command completed already keeps its first outcome.
func (s *Store) CompleteCommand(ctx context.Context, id uint64, result json.RawMessage, cmdErr error) error {
	if result != nil && !json.Valid(result) {
		return fmt.Errorf("postgres store: command %d: the result is not JSON", id)
	}
	var msg *string
	if cmdErr != nil {
		m := cmdErr.Error()
		msg = &m
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	f, err := s.currentFenceOrDeposed()
	if err != nil {
		return err
	}
	pb := &pgx.Batch{}
	pb.Queue(`UPDATE commands SET done_at = now(), result = $2, error = $3 WHERE id = $1 AND done_at IS NULL`,
		int64(id), []byte(result), msg)
	pb.Queue("SELECT pg_notify($1, $2)", s.channels.done, fmt.Sprint(id))
	queueFence(pb, f)
	if err := s.sendFenced(ctx, pb, fmt.Sprintf("complete command %d", id)); err != nil {
		return err
	}
	delete(s.cmdTaken, id)
	return nil
}

// AwaitCommand waits until the leader completes a command and returns its
// result, or its error as a *CommandError; or ctx's error.
func (s *Store) AwaitCommand(ctx context.Context, id uint64) (json.RawMessage, error) {
	w := s.hub.subscribe(s.channels.done)
	defer s.hub.unsubscribe(w)
	for {
		var (
			done   bool
			result []byte
			msg    *string
		)
		err := s.pool.QueryRow(ctx, `SELECT done_at IS NOT NULL, result, error FROM commands WHERE id = $1`, int64(id)).
			Scan(&done, &result, &msg)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("command %d: %w", id, engine.ErrNotFound)
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err == nil && done && msg != nil:
			return nil, &CommandError{ID: id, Message: *msg}
		case err == nil && done:
			return json.RawMessage(result), nil
		}
		// Not done yet, or the database is unreachable for now: wait.
		if err := s.hub.wait(ctx, w); err != nil {
			return nil, err
		}
	}
}

// sendFenced runs a batch that ends with a fence check.
func (s *Store) sendFenced(ctx context.Context, pb *pgx.Batch, what string) error {
	if err := s.pool.SendBatch(ctx, pb).Close(); err != nil {
		if isFenced(err) {
			return fmt.Errorf("%s: %w", what, ErrNotLeader)
		}
		return s.describe(what, err)
	}
	return nil
}

// leaderWaiters are the leader's long-lived subscriptions, made before its
// first Take, so that no notification falls between a Take and a Wait.
type leaderWaiters struct {
	once     sync.Once
	commands *waiter
}

func (s *Store) watchLeaderTopics() {
	s.leaderWaiters.once.Do(func() {
		s.leaderWaiters.commands = s.hub.subscribe(s.channels.commands)
	})
}
