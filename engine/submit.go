package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// Admission: validating a submission, refusing it or recording it, and
// putting it where it waits.

// Limits on what a submission may carry. The API checks its input against
// the same ones (graph/resolvers), so that its refusal names the input's
// field.
const (
	// MaxIDLength bounds, in bytes, an id, an agent id, a session key, a tab
	// or instance id and an idempotency key.
	MaxIDLength = 256
	// MaxLabels bounds a task's labels; MaxLabelLength each key and value,
	// in bytes.
	MaxLabels      = 64
	MaxLabelLength = 256
	// MaxDependsOn bounds the tasks one task depends on.
	MaxDependsOn = 256
	// MaxInstruction bounds a chat task's instruction, in bytes.
	MaxInstruction = 64 << 10
	// MaxParamsBytes bounds an action's parameters (JSON), in bytes.
	MaxParamsBytes = 256 << 10
	// MaxActionKindLength bounds an action's kind, in bytes.
	MaxActionKindLength = 64
)

// BatchItem is one task of a SubmitBatch. Key, when set, lets other items of
// the same batch name this one in their DependsOn.
type BatchItem struct {
	Key  string
	Spec TaskSpec
	// ID is the task's id when it was chosen elsewhere (Ingest: a follower
	// node that accepted the submission); empty lets the engine choose.
	ID string
	// retryOf is the task this item runs again (Retry): linked at
	// admission, so that the link is committed with the task.
	retryOf string
}

// BatchSpec is a group of tasks submitted together.
type BatchSpec struct {
	Items []BatchItem
	// Parallelism caps how many of the batch's tasks run at once (1–10);
	// 0 means no cap beyond the usual ceilings.
	Parallelism int
	// WebhookURL is called when the whole batch has ended.
	WebhookURL string
	// IDsOnly asks for the items' task ids alone: ItemResult.ID names each
	// task and ItemResult.Task may be left nil. A caller that reads nothing
	// else of the tasks spares the engine a copy of each, made under its
	// lock.
	IDsOnly bool
}

// ItemResult is the outcome of one item: a task, or an error (a typed *Error),
// or both when the task was recorded but refused (REJECTED with QUEUE_FULL).
type ItemResult struct {
	// ID is the task's id when there is a task (the one recorded, or the
	// original an idempotency key found), whether or not Task is set.
	ID   string
	Task *Task // the task as recorded; may be nil with BatchSpec.IDsOnly
	Err  error
	// Replayed says that the item's idempotency key named a task already
	// recorded, by an earlier submission or an earlier item of the same
	// batch, for the same request (SameRequest): ID and Task are that
	// task, and nothing new was recorded.
	Replayed bool
}

// BatchResult is the outcome of SubmitBatch.
type BatchResult struct {
	BatchID string
	Items   []ItemResult // in the order of BatchSpec.Items
}

// Submit admits one task. It returns the task as recorded; with a durable
// store, only once it is committed. A task refused at admission for a full
// queue is recorded REJECTED and returned along with a QUEUE_FULL error. An
// idempotency key the agent used before returns the original task when the
// spec is the same request (SameRequest), and is refused with CONFLICT
// (Error.TaskID naming the original) when it is not. SubmitItem says, in
// addition, which of the two a returned task is.
func (e *Engine) Submit(ctx context.Context, spec TaskSpec) (*Task, error) {
	r, err := e.SubmitItem(ctx, spec)
	return r.Task, err
}

// SubmitItem admits one task as Submit does, and answers as SubmitBatch
// does for an item: ItemResult.Task (and ID) is the task as recorded, and
// ItemResult.Replayed says that the spec's idempotency key named a task
// recorded before for the same request, which is returned and nothing new
// recorded. The error is ItemResult.Err, the item's refusal (with a task,
// for QUEUE_FULL), or why the call failed, with nothing else in the result.
func (e *Engine) SubmitItem(ctx context.Context, spec TaskSpec) (ItemResult, error) {
	res, err := e.submit(ctx, []BatchItem{{Spec: spec}}, nil, "")
	if err != nil {
		return ItemResult{Err: err}, err
	}
	return res.Items[0], res.Items[0].Err
}

// SubmitBatch admits several tasks as one batch. Each item succeeds or fails
// on its own, except that items naming each other in a cycle are all refused
// (CYCLE), as are items that depend on a refused item.
func (e *Engine) SubmitBatch(ctx context.Context, b BatchSpec) (*BatchResult, error) {
	if err := e.checkBatch(&b, len(b.Items)); err != nil {
		return nil, err
	}
	return e.submit(ctx, b.Items, &b, "")
}

func (e *Engine) checkBatch(b *BatchSpec, items int) error {
	if items == 0 {
		return invalid("items", "a batch needs at least one item")
	}
	if items > e.cfg.MaxBatch {
		return &Error{Code: CodeLimit, Field: "items", Message: fmt.Sprintf("a batch holds at most %d items, got %d", e.cfg.MaxBatch, items)}
	}
	if b.WebhookURL != "" {
		if err := ValidateWebhookURL(b.WebhookURL); err != nil {
			return invalid("webhookUrl", "%v", err)
		}
	}
	if b.Parallelism < 0 || b.Parallelism > 10 {
		return invalid("parallelism", "must be within 1..10 (0 for no cap), got %d", b.Parallelism)
	}
	return nil
}

// Inbound is a submission that another node accepted (a follower in a
// cluster, which sends it to the leader as a command), to be admitted here,
// by the leader.
type Inbound struct {
	// Batch is the batch's description, nil for a single task.
	Batch *BatchSpec
	// BatchID is the id the accepting node chose for the batch.
	BatchID string
	// Items carry the ids the accepting node chose.
	Items []BatchItem
}

// Ingest admits a submission accepted by another node, keeping the ids and
// submission time it was given. Admitting the same submission twice yields
// the same tasks.
func (e *Engine) Ingest(ctx context.Context, in Inbound) (*BatchResult, error) {
	if in.Batch != nil {
		if err := e.checkBatch(in.Batch, len(in.Items)); err != nil {
			return nil, err
		}
	} else if len(in.Items) != 1 {
		return nil, invalid("items", "a submission that is not a batch holds one task, got %d", len(in.Items))
	}
	for i, it := range in.Items {
		if it.ID == "" || len(it.ID) > MaxIDLength {
			return nil, invalid(itemField(in.Batch, i, "id"), "an ingested task needs its id")
		}
	}
	return e.submit(ctx, in.Items, in.Batch, in.BatchID)
}

// prepared is an item on its way in.
type prepared struct {
	id       string // chosen by the caller, or ""
	retryOf  string // the task it runs again (Retry), or ""
	spec     *TaskSpec
	deps     []string // resolved task ids (items of this batch are resolved once admitted)
	depItems []int    // indexes of the items of this batch it depends on
	err      error
	replayed bool // its idempotency key named a task recorded for the same request
}

func (e *Engine) submit(ctx context.Context, items []BatchItem, bs *BatchSpec, batchID string) (*BatchResult, error) {
	res, pb, err := e.record(ctx, items, bs, batchID)
	if err != nil {
		return nil, err
	}
	// Wait for the commit that holds what this call recorded (or what it
	// returns: an original task not yet written, in the batch in the
	// store's hands). Its attempts, when dispatched at once, joined the same
	// commit.
	if e.durable && !pb.none() {
		e.commitSoon()
		if ended, err := e.waitCommitted(ctx, pb); !ended {
			return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err,
				Message: "the submission was not confirmed durable in time; resubmit with the same idempotency key"}
		} else if err != nil {
			return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err,
				Message: "the submission could not be committed; resubmit with the same idempotency key"}
		}
	}
	return res, nil
}

// record admits a submission's items and returns what it recorded, with
// the batches that hold it, for the caller to wait for their commit.
func (e *Engine) record(ctx context.Context, items []BatchItem, bs *BatchSpec, batchID string) (*BatchResult, commitWait, error) {
	if err := e.refuseWhileFailing(); err != nil {
		return nil, commitWait{}, err
	}
	preps, order, keys := e.prepare(items, bs, e.now())

	// Look up, outside the lock, what admission will need from the store.
	ext, perr := e.prefetch(ctx, preps)
	if perr != nil {
		return nil, commitWait{}, perr
	}

	var res *BatchResult
	pb, err := e.apply(true, func(c *core) error {
		if !e.running || c.closed {
			return &Error{Code: CodeDraining, Message: "the engine is not running", Retryable: true}
		}
		res = c.admitLocked(ctx, items, bs, batchID, preps, order, keys, &ext)
		return nil
	})
	if err != nil {
		return nil, commitWait{}, err
	}
	return res, pb, nil
}

// prepare validates the items of a submission and orders them by their
// dependencies within it, before admission (admitLocked): what it can
// check without the queues. Lanes are only added at start, so it reads
// them without the lock.
func (c *core) prepare(items []BatchItem, bs *BatchSpec, now time.Time) (preps []prepared, order []int, keys map[string]int) {
	preps = make([]prepared, len(items))
	for i := range items {
		if k := items[i].Key; k != "" {
			if keys == nil {
				keys = map[string]int{}
			}
			if _, dup := keys[k]; dup {
				preps[i].err = invalid(itemField(bs, i, "key"), "key %q is used by another item", k)
				continue
			}
			keys[k] = i
		}
	}
	// The engine's copy of the last labels it took: an item whose labels
	// are the same shares it (specs are read-only once admitted), so a
	// batch whose items are labelled alike keeps one map, not one a task.
	var labels map[string]string
	var owned []ownedSpec // the next copies' room (specBlock)
	for i := range items {
		if preps[i].err != nil {
			continue
		}
		if len(owned) == 0 {
			owned = make([]ownedSpec, min(specBlock, len(items)-i))
		}
		spec, err := c.normalize(&owned[0], items[i].Spec, now, labels)
		if err != nil {
			owned[0] = ownedSpec{} // keeps nothing of the caller's
			var ee *Error
			if errors.As(err, &ee) && ee.Field != "" {
				ee.Field = itemField(bs, i, ee.Field)
			}
			preps[i].err = err
			continue
		}
		preps[i].spec = spec
		owned = owned[1:] // a refused item's room is taken by the next
		if spec.Labels != nil {
			labels = spec.Labels
		}
		preps[i].id, preps[i].retryOf = items[i].ID, items[i].retryOf
		for _, d := range spec.DependsOn {
			if j, ok := keys[d]; ok && bs != nil {
				preps[i].depItems = append(preps[i].depItems, j)
			} else {
				preps[i].deps = append(preps[i].deps, d)
			}
		}
	}
	order, cyc := topoOrder(preps)
	for i, cy := range cyc {
		if cy && preps[i].err == nil {
			ids := []string{}
			for j, cj := range cyc {
				if cj {
					ids = append(ids, itemName(items, j))
				}
			}
			preps[i].err = &Error{Code: CodeCycle, Field: itemField(bs, i, "dependsOn"), IDs: ids,
				Message: "dependencies form a cycle"}
		}
	}
	return preps, order, keys
}

// admitLocked admits the prepared items of a submission, in dependency
// order, and ranks what it admitted (a policy that is not inline ranks
// outside the driver's lock, decide.go).
func (c *core) admitLocked(ctx context.Context, items []BatchItem, bs *BatchSpec, batchID string, preps []prepared, order []int, keys map[string]int, ext *external) *BatchResult {
	// Admission happens now, under the lock: events' times follow their
	// seqs, and a task's queued time does not include the wait for the lock.
	now := c.now()
	res := &BatchResult{Items: make([]ItemResult, len(items))}
	var snaps []Task // the items' snapshots, in one allocation
	if bs == nil || !bs.IDsOnly {
		snaps = make([]Task, len(items))
	}
	var bt *batch
	created := false // bt was made by this call, not a repeated ingest's
	if bs != nil {
		if bt = c.batches[batchID]; bt == nil || batchID == "" {
			bt, created = c.newBatchLocked(bs, batchID, now), true
		}
		res.BatchID = bt.id
	}
	ids := make([]string, len(items))
	admitted := make([]*task, 0, len(items))
	replays := replayedBatch{}
	for k := range items {
		i := k
		if order != nil {
			i = order[k]
		}
		p := &preps[i]
		if p.err == nil && len(p.depItems) > 0 {
			for _, j := range p.depItems {
				if ids[j] == "" {
					p.err = invalid(itemField(bs, i, "dependsOn"), "depends on item %s, which was refused", itemName(items, j))
					break
				}
				p.deps = append(p.deps, ids[j])
			}
			// Record ids, not the batch's keys, in the dependency list.
			for k, d := range p.spec.DependsOn {
				if j, ok := keys[d]; ok {
					p.spec.DependsOn[k] = ids[j]
				}
			}
		}
		if p.err != nil {
			res.Items[i].Err = p.err
			replays.add(nil, false)
			continue
		}
		if bt != nil {
			p.spec.BatchID = bt.id
		}
		t, err := c.admitOneLocked(ctx, p, ext, now)
		res.Items[i].Replayed = p.replayed
		replays.add(t, p.replayed)
		if ee, ok := err.(*Error); ok && ee.Field != "" && bs != nil {
			ee.Field = itemField(bs, i, ee.Field) // its own, made for this item
		}
		if t != nil {
			ids[i] = t.id
			res.Items[i].ID = t.id
			if snaps != nil {
				t.snapshotTo(&snaps[i])
				res.Items[i].Task = &snaps[i]
			}
			if t.state == StateQueued || t.state == StateWaiting {
				admitted = append(admitted, t)
			}
		}
		res.Items[i].Err = err
	}
	jobs := c.rankLocked(admitted, now)
	if bt != nil {
		bt.sealed = true
		c.batchDoneLocked(bt)
		if bt.total == 0 {
			delete(c.batches, bt.id)
			if created {
				// No task joined it: every item replayed an earlier task
				// or was refused. No batch is recorded — one would look
				// finished while the tasks it answered for are not — and
				// a batch resent whole answers with the batch its tasks
				// joined first.
				c.unrecordBatchLocked(bt.id)
				res.BatchID = replays.id()
			}
		}
	}
	if jobs != nil {
		// A policy that is not inline ranks outside the lock: the engine's
		// other work goes on meanwhile, and these tasks join their queues
		// once ranked (decide.go).
		c.outside(func() { jobs.rankOutside(now) })
		c.applyRanksLocked(jobs)
		jobs.release()
	}
	return res
}

func itemField(bs *BatchSpec, i int, field string) string {
	if bs == nil {
		return field
	}
	return "items." + strconv.Itoa(i) + "." + field
}

func itemName(items []BatchItem, i int) string {
	if items[i].Key != "" {
		return items[i].Key
	}
	return "#" + strconv.Itoa(i)
}

// topoOrder orders items so that each comes after the items it depends on,
// and marks the items on or behind a cycle. Both are nil when no item
// depends on another: the items keep their order.
func topoOrder(preps []prepared) (order []int, cyclic []bool) {
	n := len(preps)
	if !slices.ContainsFunc(preps, func(p prepared) bool { return len(p.depItems) > 0 }) {
		return nil, nil // the items' own order, no cycle: the common case allocates nothing
	}
	order = make([]int, 0, n)
	cyclic = make([]bool, n)
	indeg := make([]int, n)
	out := make([][]int, n)
	for i := range preps {
		for _, j := range preps[i].depItems {
			indeg[i]++
			out[j] = append(out[j], i)
		}
	}
	queue := []int{}
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		order = append(order, i)
		for _, k := range out[i] {
			indeg[k]--
			if indeg[k] == 0 {
				queue = append(queue, k)
			}
		}
	}
	// What is left is on a cycle or behind one. Only the items that can
	// reach themselves are on a cycle; the others are refused because they
	// depend on a refused item.
	var left []int
	for i := range n {
		if indeg[i] > 0 {
			left = append(left, i)
		}
	}
	for _, i := range left {
		cyclic[i] = reaches(out, i, i)
	}
	for _, i := range left { // cycle members first, so dependents see them refused
		if cyclic[i] {
			order = append(order, i)
		}
	}
	for _, i := range left {
		if !cyclic[i] {
			order = append(order, i)
		}
	}
	return order, cyclic
}

// reaches reports whether `to` can be reached from `from` along out.
func reaches(out [][]int, from, to int) bool {
	seen := map[int]bool{}
	stack := slices.Clone(out[from])
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i == to {
			return true
		}
		if !seen[i] {
			seen[i] = true
			stack = append(stack, out[i]...)
		}
	}
	return false
}

// ownedSpec is the engine's copy of a spec and of its action.
type ownedSpec struct {
	spec   TaskSpec
	action Action
}

// specBlock is how many spec copies prepare allocates at once. A queued
// task keeps its copy, so a copy made on its own was an allocation of the
// collector's to track for every task; made by sixteen, a block is kept
// until the last of its tasks is forgotten (about 6 KB at most).
const specBlock = 16

// normalize validates a spec and returns the engine's own copy of it,
// written in own. Its labels are a copy too, or shared, when they are the
// same, with labels: a copy the engine already holds (nil for none).
func (c *core) normalize(own *ownedSpec, in TaskSpec, now time.Time, labels map[string]string) (*TaskSpec, error) {
	*own = ownedSpec{spec: in}
	s := &own.spec
	switch {
	case s.AgentID == "":
		return nil, invalid("agentId", "is required")
	case len(s.AgentID) > MaxIDLength:
		return nil, invalid("agentId", "is longer than %d bytes", MaxIDLength)
	case len(s.SessionKey) > MaxIDLength:
		return nil, invalid("sessionKey", "is longer than %d bytes", MaxIDLength)
	case len(s.TabID) > MaxIDLength || len(s.InstanceID) > MaxIDLength:
		return nil, invalid("tabId", "tab and instance ids are at most %d bytes", MaxIDLength)
	case s.Priority < PriorityCritical || s.Priority > PriorityLow:
		return nil, invalid("priority", "must be within 0 (CRITICAL) .. 3 (LOW), got %d", s.Priority)
	case (s.Action == nil) == (s.Instruction == ""):
		return nil, invalid("action", "exactly one of action and instruction is required")
	case len(s.Instruction) > MaxInstruction:
		return nil, invalid("instruction", "is longer than %d bytes", MaxInstruction)
	case s.Timeout < 0 || s.Timeout > 24*time.Hour:
		return nil, invalid("timeoutMs", "must be within 0..24h, got %s", s.Timeout)
	case s.Instruction != "" && s.Timeout > c.cfg.ChatMaxTimeout:
		return nil, invalid("timeoutMs", "a chat task's timeout is at most %s, got %s", c.cfg.ChatMaxTimeout, s.Timeout)
	case !s.Deadline.IsZero() && !s.Deadline.After(now) && s.IdempotencyKey == "":
		// With a key, a resend after the deadline may be a replay of a
		// task admitted in time: admitOneLocked decides once it has
		// looked the key up (pastDeadline).
		return nil, pastDeadline()
	case len(s.DependsOn) > MaxDependsOn:
		return nil, invalid("dependsOn", "names more than %d tasks", MaxDependsOn)
	case len(s.Labels) > MaxLabels:
		return nil, invalid("labels", "more than %d labels", MaxLabels)
	case len(s.IdempotencyKey) > MaxIDLength:
		return nil, invalid("idempotencyKey", "is longer than %d bytes", MaxIDLength)
	case s.QueueMode != QueueEnqueue && !s.QueueMode.Interrupts():
		return nil, invalid("queueMode", "unknown queue mode %d", s.QueueMode)
	case s.SessionMaxInFlight < 0 || s.SessionMaxInFlight > 100:
		return nil, invalid("sessionMaxInFlight", "must be within 0 (the engine's) .. 100, got %d", s.SessionMaxInFlight)
	case s.SessionMaxInFlight > 0 && s.Session() == "":
		return nil, invalid("sessionMaxInFlight", "needs a sessionKey or a tabId")
	case s.QueueMode.Interrupts() && s.Session() == "":
		return nil, invalid("queueMode", "interrupt needs a sessionKey or a tabId")
	case s.SessionReplay && (s.SessionKey == "" || s.TabID != ""):
		return nil, invalid("sessionReplay", "needs a sessionKey and no tabId (Switchyard rebuilds only the tabs it opened)")
	}
	if s.WebhookURL != "" {
		if err := ValidateWebhookURL(s.WebhookURL); err != nil {
			return nil, invalid("webhookUrl", "%v", err)
		}
	}
	if s.Lane == "" {
		s.Lane = "main"
	}
	if c.laneByName[s.Lane] == nil { // lanes are only added at start: safe to read unlocked
		return nil, &Error{Code: CodeInvalidInput, Field: "lane", Message: fmt.Sprintf("unknown lane %q", s.Lane)}
	}
	if s.Action != nil {
		own.action = *s.Action
		s.Action = &own.action
		a := s.Action
		if a.Kind == "" || len(a.Kind) > MaxActionKindLength {
			return nil, invalid("action.kind", "is required (at most %d bytes)", MaxActionKindLength)
		}
		if len(a.Params) > MaxParamsBytes {
			return nil, invalid("action.params", "is larger than %d bytes", MaxParamsBytes)
		}
		if string(a.Params) == "null" {
			a.Params = nil // what a JSON round trip makes of no params
		}
		if len(a.Params) > 0 && !isJSONObject(a.Params) {
			return nil, invalid("action.params", "must be a JSON object")
		}
	}
	if err := s.Exhausted.Validate(); err != nil {
		return nil, invalid("exhausted", "%q is neither %q nor %q", s.Exhausted, ExhaustedPark, ExhaustedFail)
	}
	if s.Retry != nil {
		if err := s.Retry.Validate(); err != nil {
			return nil, invalid("retryPolicy", "%v", err)
		}
		cp := *s.Retry
		s.Retry = &cp
	}
	if err := checkLabels(s.Labels); err != nil {
		return nil, err
	}
	if len(s.DependsOn) > 0 {
		seen := make(map[string]bool, len(s.DependsOn))
		for _, d := range s.DependsOn {
			if d == "" || seen[d] {
				return nil, invalid("dependsOn", "empty or repeated dependency %q", d)
			}
			seen[d] = true
		}
		s.DependsOn = slices.Clone(s.DependsOn)
	}
	if len(s.Labels) > 0 {
		if labels != nil && maps.Equal(s.Labels, labels) {
			s.Labels = labels
		} else {
			s.Labels = maps.Clone(s.Labels)
		}
	}
	s.BatchID = ""
	s.SubmittedAt = now
	if !in.SubmittedAt.IsZero() && in.SubmittedAt.Before(now) {
		s.SubmittedAt = in.SubmittedAt // ingested from elsewhere: keep the original time
	}
	return s, nil
}

// ValidateWebhookURL checks a webhook URL's form: http or https, a host, at
// most 2 KiB. Whether its address may be called is the deliverer's decision,
// made when it resolves the host.
func ValidateWebhookURL(raw string) error {
	if len(raw) > 2048 {
		return fmt.Errorf("is longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("does not parse: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("must be an absolute http or https URL")
	}
	return nil
}

// isJSONObject reports whether raw is one well-formed JSON object.
func isJSONObject(raw json.RawMessage) bool {
	i := 0
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i < len(raw) && raw[i] == '{' && json.Valid(raw)
}

// external holds what admission needs from the store, fetched before the
// engine lock is taken.
type external struct {
	tasks map[string]*Task // dependencies and parents that are not live
	idem  map[string]*Task // agentID\x00key → the original task
	// store is read, under the lock, for a task that left memory after the
	// prefetch (rare); the driver lends it, the core holds none.
	store Store
}

// prefetch reads from the store the tasks admission refers to that are not
// in memory: dependencies, parents, the tasks of ids a follower chose, and
// the originals of idempotency keys. A read that fails for another reason
// than the task's absence refuses the whole submission, retryably: admitted
// without it, a key or an id would be taken for new and its task recorded
// twice, and a dependency refused as unknown.
func (e *Engine) prefetch(ctx context.Context, preps []prepared) (external, error) {
	ext := external{store: e.store}
	needed := false
	for i := range preps {
		if s := preps[i].spec; s != nil && (len(preps[i].deps) > 0 || s.ParentID != "" || s.IdempotencyKey != "" || preps[i].id != "") {
			needed = true
			break
		}
	}
	if !needed {
		return ext, nil
	}
	ext.tasks, ext.idem = map[string]*Task{}, map[string]*Task{}
	var ids []string
	var idem [][2]string
	e.view(func(c *core) {
		for i := range preps {
			p := &preps[i]
			if p.err != nil {
				continue
			}
			for _, d := range p.deps {
				if c.tasks[d] == nil {
					ids = append(ids, d)
				}
			}
			if pid := p.spec.ParentID; pid != "" && c.tasks[pid] == nil {
				ids = append(ids, pid)
			}
			if p.id != "" && c.tasks[p.id] == nil {
				ids = append(ids, p.id)
			}
			if k := p.spec.IdempotencyKey; k != "" && c.idem[p.spec.AgentID+"\x00"+k] == nil {
				idem = append(idem, [2]string{p.spec.AgentID, k})
			}
		}
	})
	unavailable := func(what string, err error) error {
		return &Error{Code: CodeUnavailable, Message: "reading " + what + " before admission; nothing was recorded", Err: err, Retryable: true}
	}
	for _, id := range ids {
		t, err := e.store.Task(ctx, id)
		switch {
		case err == nil || errors.Is(err, ErrNotFound):
			ext.tasks[id] = t // nil: looked up, and unknown
		default:
			return ext, unavailable("task "+id, err)
		}
	}
	for _, k := range idem {
		t, err := e.store.FindIdempotent(ctx, k[0], k[1])
		switch {
		case err == nil || errors.Is(err, ErrNotFound):
			ext.idem[k[0]+"\x00"+k[1]] = t // nil: looked up, and new
		default:
			return ext, unavailable(fmt.Sprintf("idempotency key %q of agent %s", k[1], k[0]), err)
		}
	}
	return ext, nil
}

// idemLocked finds the task an idempotency key names: live, prefetched,
// or (rarely: it was live at the prefetch, and has ended and left memory
// since) from the store. Taken for new, such a key would have its request
// recorded twice.
func (c *core) idemLocked(ctx context.Context, agentID, key string, ext *external) (*task, error) {
	ik := agentID + "\x00" + key
	if t := c.idem[ik]; t != nil {
		return t, nil
	}
	st, fetched := ext.idem[ik]
	if !fetched && ext.store != nil {
		var err error
		if st, err = ext.store.FindIdempotent(ctx, agentID, key); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err,
				Message: fmt.Sprintf("reading idempotency key %q of agent %s before admission; nothing was recorded", key, agentID)}
		}
	}
	if st == nil {
		return nil, nil
	}
	return c.ghostLocked(st), nil
}

// lookupLocked finds a task that admission refers to: live, prefetched, or
// (rarely: it ended and left memory in the meantime) from the store.
func (c *core) lookupLocked(ctx context.Context, id string, ext *external) (live *task, stored *Task) {
	if t := c.tasks[id]; t != nil {
		return t, nil
	}
	if t := ext.tasks[id]; t != nil {
		return nil, t
	}
	if ext.store == nil {
		return nil, nil
	}
	if t, err := ext.store.Task(ctx, id); err == nil {
		return nil, t
	}
	return nil, nil
}

// pastDeadline refuses a new task whose deadline is not in the future.
func pastDeadline() error { return invalid("deadline", "is not in the future") }

// admitOneLocked records one prepared item: it returns the new (or, for a
// repeated idempotency key, the original) task, and an error when the item
// is refused.
func (c *core) admitOneLocked(ctx context.Context, p *prepared, ext *external, now time.Time) (*task, error) {
	spec := p.spec
	if k := spec.IdempotencyKey; k != "" {
		orig, err := c.idemLocked(ctx, spec.AgentID, k, ext)
		if err != nil {
			return nil, err
		}
		if orig != nil {
			if p.id != "" && orig.id == p.id {
				return orig, nil // ingested before: the same task
			}
			// An item that depends on items of its batch names them by
			// keys that were resolved to the tasks this submission made
			// of them, new ones unless those items were replayed too: its
			// dependencies are not compared.
			if field := requestDiffers(orig.spec, spec, len(p.depItems) == 0); field != "" {
				return nil, &Error{Code: CodeConflict, Field: "idempotencyKey", TaskID: orig.id, IDs: []string{orig.id},
					Message: fmt.Sprintf("idempotency key %q was used by task %s for a different request (its %s differs): "+
						"resend the same request to get that task, or use a new key", k, orig.id, field)}
			}
			p.replayed = true
			return orig, nil
		}
		if !spec.Deadline.IsZero() && !spec.Deadline.After(now) {
			return nil, pastDeadline() // a new task, not a replay (normalize let it by for its key)
		}
	}
	if c.draining {
		return nil, &Error{Code: CodeDraining, Message: "the engine is draining and refuses new work", Retryable: true}
	}
	// Dependencies must exist; those already ended decide at once.
	var unmet []*task
	failedDep := ""
	for _, d := range p.deps {
		live, stored := c.lookupLocked(ctx, d, ext)
		var st State
		switch {
		case live != nil:
			st = live.state
		case stored != nil:
			st = stored.State
		default:
			return nil, &Error{Code: CodeInvalidInput, Field: "dependsOn", IDs: []string{d}, Message: "unknown task " + d}
		}
		switch {
		case st == StateSucceeded:
		case st.Settled(): // ended badly, or parked: nothing waits on a parked task
			if failedDep == "" {
				failedDep = "dependency " + d + " " + lower(st.String())
			}
		default:
			unmet = append(unmet, live)
		}
	}
	depth := 0
	if pid := spec.ParentID; pid != "" {
		live, stored := c.lookupLocked(ctx, pid, ext)
		switch {
		case live != nil:
			depth = int(live.depth) + 1
		case stored != nil:
			depth = stored.Depth + 1
		default:
			return nil, &Error{Code: CodeInvalidInput, Field: "parentId", IDs: []string{pid}, Message: "unknown task " + pid}
		}
	}

	if p.id != "" {
		if t := c.tasks[p.id]; t != nil {
			return t, nil // ingested before: the same task
		}
		st, fetched := ext.tasks[p.id]
		if !fetched && ext.store != nil {
			// It was live at the prefetch, and has ended and left memory
			// since (rare): taken for new, it would be recorded twice.
			var err error
			if st, err = ext.store.Task(ctx, p.id); err != nil && !errors.Is(err, ErrNotFound) {
				return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err,
					Message: "reading task " + p.id + " before admission; nothing was recorded"}
			}
		}
		if st != nil {
			return c.ghostLocked(st), nil // ingested before: the same task
		}
	}
	t := c.newTaskLocked(spec, p.id, now)
	t.depth = uint16(depth)
	if p.retryOf != "" {
		t.outcomeOf().retryOf = p.retryOf
	}
	if b := c.batches[spec.BatchID]; b != nil {
		t.batch = b
		b.total++
		b.live++
		b.open++
	}
	if k := spec.IdempotencyKey; k != "" {
		c.idem[spec.AgentID+"\x00"+k] = t
	}
	if max := t.lane.cfg.MaxDepth; depth > max {
		c.setState(t, StateRejected, fmt.Sprintf("spawn depth %d exceeds the lane's maximum of %d", depth, max))
		return t, &Error{Code: CodeLimit, Field: "parentId", TaskID: t.id,
			Message: fmt.Sprintf("spawn depth %d exceeds lane %s's maximum of %d", depth, t.lane.cfg.Name, max)}
	}
	if cut, ok := c.cutoffs[spec.Session()]; ok && spec.SubmittedAt.Before(cut) {
		c.setState(t, StateCancelled, "session stopped")
		return t, nil
	}
	if failedDep == "" {
		if qerr := c.admitCapsLocked(t); qerr != nil {
			c.setState(t, StateRejected, qerr.Message)
			qerr.TaskID = t.id
			return t, qerr
		}
		if spec.QueueMode.Interrupts() {
			t.front = true
			c.interruptLocked(t)
		}
	}
	// Making room (drop-oldest) or interrupting may have ended a dependency:
	// look again before linking to them.
	unmet = slices.DeleteFunc(unmet, func(d *task) bool {
		if d.state.Settled() && d.state != StateSucceeded && failedDep == "" {
			failedDep = "dependency " + d.id + " " + lower(d.state.String())
		}
		return d.state.Settled()
	})
	if failedDep != "" {
		c.setState(t, StateCancelled, failedDep)
		return t, nil
	}
	if len(unmet) > 0 {
		t.unmet = uint16(len(unmet))
		for _, d := range unmet {
			o := d.outcomeOf()
			o.dependents = append(o.dependents, t)
		}
		c.setState(t, StateWaiting, "waiting for "+itoa(len(unmet))+" dependencies")
		return t, nil
	}
	if d := t.lane.cfg.Debounce; d > 0 && len(spec.DependsOn) == 0 && t.session != nil && !spec.QueueMode.Interrupts() {
		c.holdLocked(t, d, now)
		return t, nil
	}
	c.setStateAt(t, StateQueued, "admitted", now) // into its queue once ranked: see rankLocked
	if t.lane.cfg.Debounce > 0 && t.session != nil {
		c.supersedeHeldLocked(t) // an interrupt is not held: it is the burst's last word, now
	}
	return t, nil
}

// ghostLocked returns a stand-in for a task known only to the store, so that
// an idempotent resubmission can answer with it.
func (c *core) ghostLocked(st *Task) *task {
	return &task{id: st.ID, spec: st.Spec, seq: st.Seq, state: st.State, reason: st.Reason,
		attempts: st.Attempts, out: &outcome{result: st.Result, errMsg: st.Error, class: st.Class},
		createdAt: unixNano(st.CreatedAt), updatedAt: unixNano(st.UpdatedAt), endedAt: unixNano(st.EndedAt),
		lastSeq: st.LastSeq, depth: uint16(st.Depth), heapIdx: -1, timerIdx: noTimers}
}

// admitCapsLocked checks the queue caps for t — session, agent, lane, then
// global — applying the lane's drop policy. It returns the refusal, or nil
// when t may queue.
func (c *core) admitCapsLocked(t *task) *Error {
	for scope := fifoSession; scope >= -1; scope-- {
		var name, key string
		var queued, limit int
		var victim *task
		switch scope {
		case fifoSession:
			s := t.session
			if s == nil {
				continue
			}
			limit = c.cfg.MaxQueuedPerSession
			if n := t.lane.cfg.SessionMaxQueued; n > 0 {
				limit = n
			}
			name, key, queued, victim = "session", s.key, s.queued, s.fifo.head
		case fifoAgent:
			name, key, queued, limit, victim = "agent", t.agent.id, t.agent.queued, c.cfg.MaxQueuedPerAgent, t.agent.fifo.head
		case fifoLane:
			name, key, queued, limit, victim = "lane", t.lane.cfg.Name, t.lane.queued, t.lane.cfg.MaxQueued, t.lane.fifo.head
		default:
			name, queued, limit = "global", c.queued, c.cfg.MaxQueued
		}
		if limit <= 0 || queued < limit {
			continue
		}
		drop := t.lane.cfg.DropPolicy
		if scope == fifoSession && t.lane.cfg.SessionDropPolicy != "" {
			drop = t.lane.cfg.SessionDropPolicy
		}
		if drop == DropOldest {
			if scope < 0 {
				victim = c.oldestQueuedLocked()
			}
			if victim != nil {
				c.setState(victim, StateCancelled, "dropped: queue full")
				c.stats.dropped++
				continue
			}
		}
		c.stats.rejected++
		return &Error{Code: CodeQueueFull, Retryable: true,
			Counts:  &QueueCounts{Scope: name, Key: key, Queued: queued, Cap: limit},
			Message: fmt.Sprintf("queue full: %s %s holds %d of %d", name, key, queued, limit)}
	}
	return nil
}

// oldestQueuedLocked returns the task queued longest in the whole engine:
// the oldest of the lanes' oldest.
func (c *core) oldestQueuedLocked() *task {
	var oldest *task
	for _, l := range c.lanes {
		if h := l.fifo.head; h != nil && (oldest == nil || h.queuedAt < oldest.queuedAt ||
			h.queuedAt == oldest.queuedAt && h.seq < oldest.seq) {
			oldest = h
		}
	}
	return oldest
}

func policyTask(t *task) policy.Task {
	var dl int64
	if !t.spec.Deadline.IsZero() {
		dl = t.spec.Deadline.UnixMilli()
	}
	var flags uint32
	if t.spec.TabID != "" {
		flags |= policy.TaskHasTab
	}
	if t.spec.Instruction != "" {
		flags |= policy.TaskInstruction
	}
	if t.front {
		flags |= policy.TaskInterrupt
	}
	return policy.Task{
		Seq: t.seq, CreatedAtMs: t.createdAt / int64(time.Millisecond), DeadlineMs: dl, Priority: int32(t.spec.Priority),
		Agent: t.agent.idx, Lane: t.lane.idx, Attempts: uint16(len(t.attempts)), Depth: uint16(t.depth), Flags: flags,
	}
}

// newTaskLocked creates a task in no state yet, linked to its lane, agent,
// session and counted by them.
func (c *core) newTaskLocked(spec *TaskSpec, id string, now time.Time) *task {
	if id == "" {
		id = c.ids.next(now)
	}
	t := &task{
		id: id, spec: spec, createdAt: now.UnixNano(), updatedAt: now.UnixNano(),
		lane: c.laneByName[spec.Lane], heapIdx: -1, timerIdx: noTimers,
	}
	t.seq = c.seq + 1 // the seq its first event will take
	t.unranked = true // rankLocked ranks it before it joins a queue
	t.agent = c.agentLocked(spec.AgentID)
	t.agent.live++
	if key := spec.SessionScope(); key != "" {
		t.session = c.sessionLocked(key)
		t.session.live++
		c.sessionLimitLocked(t.session, spec.SessionMaxInFlight)
	}
	c.tasks[t.id] = t
	c.stats.submitted++
	return t
}

func (c *core) agentLocked(id string) *agent {
	a := c.agents[id]
	if a == nil {
		c.agentIdx++
		a = &agent{id: id, idx: c.agentIdx, weight: 1, limit: c.cfg.AgentMaxInFlight}
		if c, ok := c.cfg.Agents[id]; ok {
			if c.Weight > 0 {
				a.weight = c.Weight
			}
			if c.MaxInFlight > 0 {
				a.limit = c.MaxInFlight
			}
			a.labels = policy.MakeLabels(c.Labels)
		}
		c.agents[id] = a
	}
	return a
}

func (c *core) sessionLocked(key string) *session {
	s := c.sessions[key]
	if s == nil {
		s = &session{key: key, lim: limiter{limit: c.cfg.SessionMaxInFlight}}
		c.sessions[key] = s
	}
	return s
}

// sessionLimitLocked sets a session's ceiling from a task that asks for
// one (the latest such task wins; 0 leaves it as it is).
func (c *core) sessionLimitLocked(s *session, n int) {
	if n <= 0 || s.lim.limit == n {
		return
	}
	s.lim.limit = n
	c.wakeLocked(&s.lim) // a higher ceiling may let waiting heads go
}

func (c *core) newBatchLocked(bs *BatchSpec, id string, now time.Time) *batch {
	if id == "" {
		id = c.ids.next(now)
	}
	b := &batch{id: id, parallelism: bs.Parallelism, createdAt: now,
		webhook: bs.WebhookURL}
	b.lim.limit = bs.Parallelism
	c.batches[b.id] = b
	c.cur.batches = append(c.cur.batches, BatchInfo{ID: b.id, Parallelism: b.parallelism, WebhookURL: b.webhook, CreatedAt: now})
	return b
}

// unrecordBatchLocked takes back the record of a batch made in this
// admission, before it is committed.
func (c *core) unrecordBatchLocked(id string) {
	c.cur.batches = slices.DeleteFunc(c.cur.batches, func(b BatchInfo) bool { return b.ID == id })
}

// replayedBatch finds the batch of the tasks a batch's items replayed,
// when every item replayed a task of one batch, from the tasks themselves:
// with BatchSpec.IDsOnly the items carry no snapshot to read it from.
type replayedBatch struct {
	batch string
	mixed bool // an item was not a replay of that batch's task
}

// add counts an item: t is its task (nil when it was refused), replayed
// whether it replayed an earlier one.
func (r *replayedBatch) add(t *task, replayed bool) {
	switch {
	case r.mixed:
	case !replayed || t == nil || t.spec.BatchID == "" || (r.batch != "" && t.spec.BatchID != r.batch):
		r.mixed = true
	default:
		r.batch = t.spec.BatchID
	}
}

// id is the batch every item replayed a task of, or "".
func (r *replayedBatch) id() string {
	if r.mixed {
		return ""
	}
	return r.batch
}

// interruptLocked cancels what t's session is running: an interrupting task
// takes over the session.
func (c *core) interruptLocked(t *task) {
	drain := t.spec.QueueMode == QueueInterruptDrain
	for _, o := range c.sessionMembersLocked(t.session) {
		switch {
		case o == t:
		case o.state.InFlight():
			c.cancelLocked(o, "interrupted by task "+t.id)
		case drain && pending(o.state):
			c.cancelLocked(o, "drained by the interrupt of task "+t.id)
		}
	}
}

// Validate checks a spec as Submit would, without admitting anything: for
// components that keep specs to submit later (schedule templates).
func (e *Engine) Validate(spec TaskSpec) error {
	_, err := e.normalize(new(ownedSpec), spec, e.now(), nil)
	return err
}

// checkLabels checks a task's or an agent's labels against the limits.
func checkLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return invalid("labels", "more than %d labels", MaxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > MaxLabelLength || len(v) > MaxLabelLength {
			return invalid("labels", "label keys are 1..%d bytes and values at most %d", MaxLabelLength, MaxLabelLength)
		}
	}
	return nil
}
