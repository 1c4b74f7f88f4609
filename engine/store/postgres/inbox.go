package postgres

// Follower submissions and commands. A follower does not forward work
// through itself: it writes it to a table and notifies the leader.
//
// The inbox holds submissions (tasks with ids the follower chose). The
// leader takes the oldest items, admits them through its engine, and the
// commit that writes their tasks deletes the items in the same transaction
// (Commit knows the items it was handed by their task ids): an item is
// either still in the inbox or admitted, never both, never neither. Items
// that produce no new task (refused at validation, or a duplicate of an
// idempotency key) are deleted with DoneInbox.
//
// Commands (cancel a task, update a lane, set a policy, …) are opaque JSON
// the caller defines. The leader takes them, applies them and completes them
// with a result or an error; the submitting follower waits in AwaitCommand,
// woken by a notification. A leader that dies between applying a command and
// completing it leaves the command to its successor: commands are applied
// at least once, so they should be idempotent.

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

// Inbound is one submission a follower accepted: a task, or a batch of them.
type Inbound struct {
	ID          uint64    // the inbox order, set by Enqueue
	Node        string    // the node that accepted the submission
	SubmittedAt time.Time // when it accepted it
	// Batch says the items were submitted together as a batch
	// (engine.SubmitBatch), with its Parallelism and WebhookURL; otherwise
	// Items holds one task.
	Batch       bool
	Parallelism int
	WebhookURL  string
	Items       []InboundItem
}

// InboundItem is one task of a submission.
type InboundItem struct {
	TaskID string // chosen by the accepting node: the admitted task has this id
	Key    string // the client's key of a batch item (engine.BatchItem.Key)
	Spec   engine.TaskSpec
}

type inboundDoc struct {
	Batch       bool          `json:"batch,omitempty"`
	Parallelism int           `json:"parallelism,omitempty"`
	WebhookURL  string        `json:"webhookUrl,omitempty"`
	Items       []inboundItem `json:"items"`
}

type inboundItem struct {
	TaskID string          `json:"taskId"`
	Key    string          `json:"key,omitempty"`
	Spec   json.RawMessage `json:"spec"`
	Params []byte          `json:"params,omitempty"` // base64: kept byte for byte
}

func encodeInbound(in *Inbound) ([]byte, error) {
	d := inboundDoc{Batch: in.Batch, Parallelism: in.Parallelism, WebhookURL: in.WebhookURL, Items: make([]inboundItem, len(in.Items))}
	for i := range in.Items {
		it := &in.Items[i]
		spec, params, err := encodeSpec(&it.Spec)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		d.Items[i] = inboundItem{TaskID: it.TaskID, Key: it.Key, Spec: spec, Params: params}
	}
	return json.Marshal(&d)
}

func decodeInbound(data []byte, in *Inbound) error {
	var d inboundDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	in.Batch, in.Parallelism, in.WebhookURL = d.Batch, d.Parallelism, d.WebhookURL
	in.Items = make([]InboundItem, len(d.Items))
	for i, it := range d.Items {
		spec, err := decodeSpec(it.Spec, it.Params)
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		in.Items[i] = InboundItem{TaskID: it.TaskID, Key: it.Key, Spec: *spec}
	}
	return nil
}

// Enqueue writes submissions to the inbox, durably and in one transaction,
// notifies the leader and returns their inbox ids. Every item needs a task id.
func (s *Store) Enqueue(ctx context.Context, in []Inbound) ([]uint64, error) {
	if len(in) == 0 {
		return nil, nil
	}
	pb := &pgx.Batch{}
	for i := range in {
		if len(in[i].Items) == 0 {
			return nil, fmt.Errorf("postgres store: enqueue: submission %d has no items", i)
		}
		for j, it := range in[i].Items {
			if it.TaskID == "" {
				return nil, fmt.Errorf("postgres store: enqueue: submission %d, item %d: no task id", i, j)
			}
		}
		payload, err := encodeInbound(&in[i])
		if err != nil {
			return nil, fmt.Errorf("postgres store: enqueue: submission %d: %w", i, err)
		}
		pb.Queue("INSERT INTO inbox (node, submitted_at, payload) VALUES ($1, $2, $3) RETURNING id",
			in[i].Node, unixNano(in[i].SubmittedAt), payload)
	}
	pb.Queue("SELECT pg_notify($1, '')", s.channels.inbox)
	ids := make([]uint64, len(in))
	br := s.pool.SendBatch(ctx, pb)
	for i := range in {
		var id int64
		if err := br.QueryRow().Scan(&id); err != nil {
			_ = br.Close()
			return nil, s.describe("enqueue", err)
		}
		ids[i] = uint64(id)
	}
	if err := br.Close(); err != nil {
		return nil, s.describe("enqueue", err)
	}
	for i := range in {
		in[i].ID = ids[i]
	}
	return ids, nil
}

// takenState is the leader's record of what it took and has not finished
// (guarded by Store.wmu): a taken item is not handed out again until the
// fence moves to another epoch.
type takenState struct {
	inboxTaken map[string]uint64   // task id → inbox row
	inboxRows  map[uint64][]string // inbox row → its task ids
	cmdTaken   map[uint64]struct{}
}

func (s *Store) forgetTakenLocked() {
	s.inboxTaken, s.inboxRows, s.cmdTaken = map[string]uint64{}, map[uint64][]string{}, map[uint64]struct{}{}
}

// inboxCommittedLocked forgets inbox rows a commit deleted.
func (s *Store) inboxCommittedLocked(rows []int64) {
	for _, r := range rows {
		for _, id := range s.inboxRows[uint64(r)] {
			delete(s.inboxTaken, id)
		}
		delete(s.inboxRows, uint64(r))
	}
}

// TakeInbox returns up to limit of the oldest inbox items this store has not
// handed out yet, in inbox order. They stay in the inbox until the commit
// that writes their tasks (or DoneInbox) deletes them. Meant for the leader,
// from one goroutine.
func (s *Store) TakeInbox(ctx context.Context, limit int) ([]Inbound, error) {
	if limit <= 0 {
		return nil, nil
	}
	s.watchLeaderTopics()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.syncEpochLocked(ctx); err != nil {
		return nil, s.describe("take inbox", err)
	}
	taken := make([]int64, 0, len(s.inboxRows))
	for r := range s.inboxRows {
		taken = append(taken, int64(r))
	}
	rows, err := s.pool.Query(ctx, `SELECT id, node, submitted_at, payload FROM inbox WHERE id <> ALL($1::bigint[]) ORDER BY id LIMIT $2`,
		taken, int64(limit))
	if err != nil {
		return nil, s.describe("take inbox", err)
	}
	var out []Inbound
	var (
		id, at  int64
		node    string
		payload []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &node, &at, &payload}, func() error {
		in := Inbound{ID: uint64(id), Node: node, SubmittedAt: fromUnixNano(at)}
		if err := decodeInbound(payload, &in); err != nil {
			return fmt.Errorf("inbox item %d: %w", id, err)
		}
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, s.describe("take inbox", err)
	}
	for _, in := range out {
		ids := make([]string, len(in.Items))
		for i, it := range in.Items {
			ids[i] = it.TaskID
			s.inboxTaken[it.TaskID] = in.ID
		}
		s.inboxRows[in.ID] = ids
	}
	return out, nil
}

// DoneInbox deletes inbox items that produced no new task (refused, or
// answered by an existing task). Under a fence, only the leader can.
func (s *Store) DoneInbox(ctx context.Context, ids ...uint64) error {
	if len(ids) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	pb := &pgx.Batch{}
	if err := s.queueFence(pb); err != nil {
		return err
	}
	rows := make([]int64, len(ids))
	for i, id := range ids {
		rows[i] = int64(id)
	}
	pb.Queue(inboxDoneSQL, rows)
	if err := s.sendFenced(ctx, pb, "delete inbox items"); err != nil {
		return err
	}
	s.inboxCommittedLocked(rows)
	return nil
}

// WaitInbox blocks until the inbox may hold new items (a follower notified,
// the listener reconnected, or the poll interval passed), or ctx ends. A
// notification that arrives between TakeInbox and WaitInbox is not lost.
func (s *Store) WaitInbox(ctx context.Context) error {
	s.watchLeaderTopics()
	return s.hub.wait(ctx, s.leaderWaiters.inbox)
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
	pb := &pgx.Batch{}
	if err := s.queueFence(pb); err != nil {
		return err
	}
	pb.Queue(`UPDATE commands SET done_at = now(), result = $2, error = $3 WHERE id = $1 AND done_at IS NULL`,
		int64(id), []byte(result), msg)
	pb.Queue("SELECT pg_notify($1, $2)", s.channels.done, fmt.Sprint(id))
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

// sendFenced runs a batch that starts with a fence check.
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
	once            sync.Once
	inbox, commands *waiter
}

func (s *Store) watchLeaderTopics() {
	s.leaderWaiters.once.Do(func() {
		s.leaderWaiters.inbox = s.hub.subscribe(s.channels.inbox)
		s.leaderWaiters.commands = s.hub.subscribe(s.channels.commands)
	})
}
