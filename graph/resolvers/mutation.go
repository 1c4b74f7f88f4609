// Mutations: submitting and cancelling work, tuning lanes and agents,
// managing instances. Each validates its input first (validate.go).

package resolvers

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/poison"
)

func (m *mutationResolver) SubmitTask(ctx context.Context, input model.SubmitTaskInput) (*model.Task, error) {
	var (
		t        *model.Task
		replayed bool
		err      error
	)
	if pre := takeSubmitted(ctx); pre != nil {
		if pre.Panic != nil {
			panic(pre.Panic)
		}
		t, replayed, err = pre.Task, pre.Replayed, pre.Err
	} else {
		t, replayed, err = (*Resolver)(m).submitTask(ctx, input)
	}
	if err == nil && deref(input.IdempotencyKey) != "" {
		reportReplayed(ctx, replayed)
	}
	return t, err
}

// Submitted is a submitTask field resolved before gqlgen's executor ran it:
// the server's fast path calls Tools.SubmitTask itself and writes the
// answer, and hands the request to the executor for the answers it does
// not write (an error, a panic, no task), with the outcome in the
// request's context (WithSubmitted) for the field to return as its own:
// the resolver does not run twice.
type Submitted struct {
	Task     *model.Task
	Replayed bool
	Err      error
	Panic    any // what the resolver panicked with; the field panics with it again
}

type submittedKey struct{}

// WithSubmitted returns ctx carrying s for the one submitTask field of the
// request's operation.
func WithSubmitted(ctx context.Context, s *Submitted) context.Context {
	return context.WithValue(ctx, submittedKey{}, &submittedOnce{s: s})
}

// submittedOnce gives its outcome to one field only.
type submittedOnce struct {
	mu sync.Mutex
	s  *Submitted
}

// takeSubmitted returns the outcome ctx carries, once.
func takeSubmitted(ctx context.Context) *Submitted {
	o, _ := ctx.Value(submittedKey{}).(*submittedOnce)
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.s
	o.s = nil
	return s
}

// submitTask is the submitTask mutation: the task as recorded, and whether
// the input's idempotencyKey named a task recorded before for the same
// request, which it returns, nothing new recorded
// (engine.ItemResult.Replayed).
func (r *Resolver) submitTask(ctx context.Context, input model.SubmitTaskInput) (*model.Task, bool, error) {
	spec, verr := taskSpec("input", &input, time.Now())
	if verr == nil {
		verr = r.checkTask(ctx, "input", &spec)
	}
	if verr != nil {
		return nil, false, verr
	}
	if err := r.checkSubmission(ctx, "input", &spec, nil); err != nil {
		return nil, false, err
	}
	res, err := r.eng.SubmitItem(ctx, spec)
	if err != nil {
		return nil, false, inField(err, "input")
	}
	r.fillPositions(ctx, res.Task)
	return model.NewTask(res.Task), res.Replayed, nil
}

// ReplayedExtension is the key of the response extension in which a
// GraphQL response says, for each submitTask field whose input had an
// idempotencyKey and that returned a task, whether that task was recorded
// before (replayed: true) or by this call (false). Its value is an object
// keyed by the fields' response keys, their aliases or `submitTask`:
//
//	{"data": {"submitTask": {…}}, "extensions": {"replayed": {"submitTask": true}}}
const ReplayedExtension = "replayed"

// reportReplayed adds a submitTask field's answer to the response's
// ReplayedExtension. A call from outside a GraphQL operation (none) has no
// response to add it to.
func reportReplayed(ctx context.Context, replayed bool) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !graphql.HasOperationContext(ctx) {
		return
	}
	fields, _ := graphql.GetExtension(ctx, ReplayedExtension).(*replayedFields)
	if fields == nil {
		// A mutation's fields run one after the other: none registers
		// the extension between this look and this registration.
		fields = &replayedFields{}
		graphql.RegisterExtension(ctx, ReplayedExtension, fields)
	}
	fields.set(fc.Field.Alias, replayed)
}

// replayedFields is the value of the ReplayedExtension: each submitTask
// field's response key and whether its task was replayed.
type replayedFields struct {
	mu     sync.Mutex
	fields map[string]bool
}

func (f *replayedFields) set(key string, replayed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fields == nil {
		f.fields = map[string]bool{}
	}
	f.fields[key] = replayed
}

// MarshalJSON writes the fields as a JSON object.
func (f *replayedFields) MarshalJSON() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Marshal(f.fields)
}

func (m *mutationResolver) SubmitTasks(ctx context.Context, input model.SubmitTasksInput) (*model.SubmitTasksPayload, error) {
	n := len(input.Items)
	switch {
	case n == 0:
		return nil, invalid("input.items", "a batch needs at least one item")
	case n > m.maxBat:
		return nil, limitError("input.items", "a batch holds at most %d items, got %d", m.maxBat, n)
	}
	par := deref(input.Parallelism)
	if input.Parallelism != nil && (par < 1 || par > 10) {
		return nil, invalid("input.parallelism", "must be within 1..10 (omit it for no cap), got %d", par)
	}
	if input.WebhookURL != nil {
		if err := checkURL("input.webhookUrl", *input.WebhookURL); err != nil {
			return nil, err
		}
		if err := (*Resolver)(m).checkWebhook("input.webhookUrl", *input.WebhookURL); err != nil {
			return nil, err
		}
	}

	// Validate every item; an item that fails, and every item that depends
	// on it, is refused here and never reaches the engine.
	now := time.Now()
	out := &model.SubmitTasksPayload{Items: make([]*model.SubmitTaskResult, n)}
	results := make([]model.SubmitTaskResult, n) // the items' results, in one allocation
	// The items to submit, their specs filled in place (compacted below).
	specs := batchItems.get(n)
	defer batchItems.put(specs)
	acts := batchActions.get(n) // the specs' actions
	defer batchActions.put(acts)
	refused := make([]*engine.Error, n)
	var keys map[string]int // made at the first key: most batches have none
	var labels sharedLabels
	for i, it := range input.Items {
		path, taskPath := itemPaths(i)
		results[i] = model.SubmitTaskResult{Index: i, Key: it.Key}
		out.Items[i] = &results[i]
		if k := deref(it.Key); k != "" || it.Key != nil {
			if err := checkID(path+".key", k, true); err != nil {
				refused[i] = err
				continue
			}
			if _, dup := keys[k]; dup {
				refused[i] = invalid(path+".key", "key %q is used by another item", k)
				continue
			}
			if keys == nil {
				keys = make(map[string]int, n)
			}
			keys[k] = i
		}
		specs[i].Spec, refused[i] = taskSpecShared(taskPath, it.Task, now, &labels, &acts[i])
		if refused[i] == nil {
			refused[i] = (*Resolver)(m).checkTask(ctx, taskPath, &specs[i].Spec)
		}
	}
	// An agent's batch is refused as a whole when an item acts for another
	// agent (or names another agent's task): nothing of it is admitted.
	for i := range specs {
		if refused[i] != nil {
			continue
		}
		_, taskPath := itemPaths(i)
		if err := (*Resolver)(m).checkSubmission(ctx, taskPath, &specs[i].Spec, keys); err != nil {
			return nil, err
		}
	}
	for changed := true; changed; {
		changed = false
		for i := range specs {
			if refused[i] != nil {
				continue
			}
			for _, d := range specs[i].Spec.DependsOn {
				if j, ok := keys[d]; ok && refused[j] != nil {
					refused[i] = invalid("input.items."+strconv.Itoa(i)+".task.dependsOn", "depends on item %s, which was refused", d)
					changed = true
					break
				}
			}
		}
	}

	items := specs[:0]        // in place: an item moves only to an index it has passed
	orig := make([]int, 0, n) // engine item → input item
	for i := range specs {
		if refused[i] != nil {
			out.Items[i].Error = &model.ItemError{E: refused[i]}
			out.Refused++
			continue
		}
		specs[i].Key = deref(input.Items[i].Key)
		items = append(items, specs[i])
		orig = append(orig, i)
	}
	if len(items) == 0 {
		return out, nil
	}
	// A selection that reads no item's task (`accepted refused`, as
	// `switchyard bench`) needs only the tasks' ids, for the audit.
	idsOnly := !selectsItemTasks(ctx)
	res, err := m.eng.SubmitBatch(ctx, engine.BatchSpec{Items: items, Parallelism: par, WebhookURL: deref(input.WebhookURL), IDsOnly: idsOnly})
	if err != nil {
		return nil, inField(err, "input")
	}
	if res.BatchID != "" {
		out.BatchID = &res.BatchID
	}
	var views []model.Task // the items' tasks, in one allocation
	if idsOnly {
		out.TaskIDs = make([]string, 0, len(res.Items))
		for _, r := range res.Items {
			if r.ID != "" {
				out.TaskIDs = append(out.TaskIDs, r.ID)
			}
		}
	} else {
		tasks := make([]*engine.Task, 0, len(res.Items))
		for _, r := range res.Items {
			tasks = append(tasks, r.Task)
		}
		(*Resolver)(m).fillPositions(ctx, tasks...)
		views = make([]model.Task, len(res.Items))
	}
	for j, r := range res.Items {
		item := out.Items[orig[j]]
		item.Replayed = r.Replayed
		if r.Task != nil && views != nil {
			views[j] = model.Task{T: r.Task}
			item.Task = &views[j]
		}
		if r.Err != nil {
			item.Error = &model.ItemError{E: renumber(asEngineError(r.Err), orig)}
			out.Refused++
		} else {
			out.Accepted++
		}
	}
	return out, nil
}

// batchItems keeps the engine items of a submitTasks request for the next
// one. SubmitBatch keeps nothing of its items once it returns (the
// engine's copies each spec; a cluster follower's copies them into the
// command it sends the leader), and at about 36 KB a batch of 100 they were the largest
// allocation a request made: every byte allocated brings the collector's
// next cycle nearer, and each cycle marks the whole queue.
var batchItems slicePool[engine.BatchItem]

// batchActions keeps the room for the actions of a submitTasks request's
// engine items, as batchItems keeps the items: the engine copies each
// action with its spec (and a cluster follower encodes them into its
// command) before SubmitBatch returns, so an action the resolver made was
// garbage at once, one allocation an item (ADR 0005, finding 26).
var batchActions slicePool[engine.Action]

// maxPooledItems bounds the lists kept: a server configured for larger
// batches allocates those beyond it.
const maxPooledItems = 1000

// slicePool keeps zeroed lists of up to maxPooledItems elements for the
// next request.
type slicePool[T any] struct{ p sync.Pool }

// get returns n zero elements.
func (sp *slicePool[T]) get(n int) []T {
	if p, ok := sp.p.Get().(*[]T); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]T, n)
}

// put zeroes list, so that a list waiting in the pool holds on to nothing
// of the request's, and keeps it for the next request. Nothing may read
// the list, or what points into it (an engine item's Spec.Action), after
// put: under tests (internal/poison) it is overwritten with poison, to its
// capacity, and left out of the pool, so that such a read shows.
func (sp *slicePool[T]) put(list []T) {
	if poison.On() {
		list = list[:cap(list)]
		for i := range list {
			poison.Fill(&list[i])
		}
		return
	}
	if cap(list) > maxPooledItems {
		return
	}
	list = list[:cap(list)]
	clear(list)
	sp.p.Put(&list)
}

// renumber rewrites an engine item error, which numbers the items the engine
// saw, in the numbering of the input and under its path.
func renumber(e *engine.Error, orig []int) *engine.Error {
	cp := *e
	if rest, ok := strings.CutPrefix(e.Field, "items."); ok {
		idx, sub, _ := strings.Cut(rest, ".")
		if j, err := strconv.Atoi(idx); err == nil && j < len(orig) {
			cp.Field = "input.items." + strconv.Itoa(orig[j])
			if sub != "" && sub != "key" {
				cp.Field += ".task"
			}
			if sub != "" {
				cp.Field += "." + sub
			}
		}
	} else if e.Field != "" {
		cp.Field = "input." + e.Field
	}
	if len(e.IDs) > 0 {
		cp.IDs = make([]string, len(e.IDs))
		for i, id := range e.IDs {
			if j, err := strconv.Atoi(strings.TrimPrefix(id, "#")); strings.HasPrefix(id, "#") && err == nil && j < len(orig) {
				id = "#" + strconv.Itoa(orig[j])
			}
			cp.IDs[i] = id
		}
	}
	return &cp
}

func checkReason(reason *string) (string, error) {
	r := deref(reason)
	if len(r) > maxReason {
		return "", invalid("reason", "is longer than %d bytes", maxReason)
	}
	return r, nil
}

func (m *mutationResolver) CancelTask(ctx context.Context, id string, reason *string) (*model.Task, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	why, err := checkReason(reason)
	if err != nil {
		return nil, err
	}
	if err := (*Resolver)(m).checkOwnTask(ctx, id); err != nil {
		return nil, err
	}
	t, err := m.eng.Cancel(ctx, id, why)
	if err != nil {
		var ee *engine.Error
		if errors.As(err, &ee) && t != nil && ee.TaskID == "" {
			cp := *ee
			cp.TaskID = t.ID
			return nil, &cp
		}
		return nil, err
	}
	return model.NewTask(t), nil
}

func (m *mutationResolver) CancelTasks(ctx context.Context, filter model.TaskFilter, reason *string) (*model.CancelPayload, error) {
	f, ferr := taskFilter("filter", &filter)
	if ferr != nil {
		return nil, ferr
	}
	why, err := checkReason(reason)
	if err != nil {
		return nil, err
	}
	if err := scopeFilter(ctx, "filter", &f); err != nil {
		return nil, err
	}
	ids, err := m.eng.CancelWhere(ctx, f, why)
	if err != nil {
		return nil, err
	}
	return &model.CancelPayload{Ids: ids, Count: len(ids)}, nil
}

func (m *mutationResolver) StopSession(ctx context.Context, sessionKey string, all *bool) (*model.CancelPayload, error) {
	if err := checkID("sessionKey", sessionKey, true); err != nil {
		return nil, err
	}
	agent, err := ownAgent(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	if agent != "" {
		ids, err = (*Resolver)(m).stopOwnSession(ctx, sessionKey, agent, deref(all))
	} else {
		ids, err = m.eng.StopSession(ctx, sessionKey, deref(all))
	}
	if err != nil {
		return nil, err
	}
	if ids == nil {
		ids = []string{}
	}
	return &model.CancelPayload{Ids: ids, Count: len(ids)}, nil
}

func (m *mutationResolver) RetryTask(ctx context.Context, id string) (*model.Task, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	if err := (*Resolver)(m).checkOwnTask(ctx, id); err != nil {
		return nil, err
	}
	t, err := m.eng.Retry(ctx, id)
	if err != nil {
		return nil, err
	}
	return model.NewTask(t), nil
}

func (m *mutationResolver) ResetTask(ctx context.Context, id string) (*model.Task, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	if err := (*Resolver)(m).checkOwnTask(ctx, id); err != nil {
		return nil, err
	}
	t, err := m.eng.Reset(ctx, id)
	if err != nil {
		return nil, err
	}
	return model.NewTask(t), nil
}

func (m *mutationResolver) UpdateLane(ctx context.Context, name string, input model.LaneInput) (*model.Lane, error) {
	if !validName(name) {
		return nil, invalid("name", "%q is not a lane name", name)
	}
	u, err := laneUpdate(input)
	if err != nil {
		return nil, err
	}
	l, err := m.eng.UpdateLane(ctx, name, u)
	if err != nil {
		return nil, inField(err, "input")
	}
	return &model.Lane{L: l}, nil
}

func (m *mutationResolver) CreateLane(ctx context.Context, name string, input *model.LaneInput) (*model.Lane, error) {
	if !validName(name) {
		return nil, invalid("name", "%q is not a lane name (letters, digits, '-' and '_', at most 64)", name)
	}
	var u engine.LaneUpdate
	if input != nil {
		var err error
		if u, err = laneUpdate(*input); err != nil {
			return nil, err
		}
	}
	u.Create = true
	l, err := m.eng.UpdateLane(ctx, name, u)
	if err != nil {
		return nil, inField(err, "input")
	}
	return &model.Lane{L: l}, nil
}

func (m *mutationResolver) DeleteLane(ctx context.Context, name string) (*model.Lane, error) {
	if !validName(name) {
		return nil, invalid("name", "%q is not a lane name", name)
	}
	l, err := m.eng.UpdateLane(ctx, name, engine.LaneUpdate{Remove: true})
	if err != nil {
		return nil, err
	}
	return &model.Lane{L: l}, nil
}

// laneUpdate checks a LaneInput and turns it into the engine's update.
func laneUpdate(input model.LaneInput) (engine.LaneUpdate, error) {
	var u engine.LaneUpdate
	if v := input.MaxInFlight; v != nil {
		if *v < 0 {
			return u, invalid("input.maxInFlight", "must not be negative, got %d", *v)
		}
		u.MaxInFlight = v
	}
	if v := input.MaxQueued; v != nil {
		if *v < 1 {
			return u, invalid("input.maxQueued", "must be at least 1, got %d", *v)
		}
		u.MaxQueued = v
	}
	if v := input.MaxDepth; v != nil {
		if *v < 1 || *v > 1000 {
			return u, invalid("input.maxDepth", "must be within 1..1000, got %d", *v)
		}
		u.MaxDepth = v
	}
	u.DropPolicy, u.Paused, u.Exhausted = input.DropPolicy, input.Paused, input.Exhausted
	if v := input.TimeoutMs; v != nil {
		d, err := millis("input.timeoutMs", *v, 1, maxTimeout)
		if err != nil {
			return u, err
		}
		u.Timeout = &d
	}
	if input.RetryPolicy != nil {
		rp, err := retryPolicy("input.retryPolicy", input.RetryPolicy)
		if err != nil {
			return u, err
		}
		u.Retry = &rp
	}
	if v := input.SessionMaxQueued; v != nil {
		if *v < 0 {
			return u, invalid("input.sessionMaxQueued", "must not be negative, got %d", *v)
		}
		u.SessionMaxQueued = v
	}
	u.SessionDropPolicy = input.SessionDropPolicy
	if v := input.DebounceMs; v != nil {
		d, err := millis("input.debounceMs", *v, 0, engine.MaxDebounce)
		if err != nil {
			return u, err
		}
		u.Debounce = &d
	}
	u.Pull = input.Pull
	return u, nil
}

func (m *mutationResolver) SetAgent(ctx context.Context, id string, input model.AgentInput) (*engine.AgentStatus, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	var c engine.AgentConfig
	if v := input.Weight; v != nil {
		if *v < 1 || *v > 1_000_000 {
			return nil, invalid("input.weight", "must be within 1..1000000, got %d", *v)
		}
		c.Weight = *v
	}
	if v := input.MaxInFlight; v != nil {
		if *v < 1 {
			return nil, invalid("input.maxInFlight", "must be at least 1, got %d", *v)
		}
		c.MaxInFlight = *v
	}
	if input.Labels != nil {
		labels, err := labelMap("input.labels", input.Labels)
		if err != nil {
			return nil, err
		}
		if labels == nil {
			labels = map[string]string{} // [] clears them
		}
		c.Labels = labels
	}
	if err := m.eng.SetAgent(ctx, id, c); err != nil {
		return nil, inField(err, "input")
	}
	for _, a := range m.eng.Agents(ctx) {
		if a.ID == id {
			return &a, nil
		}
	}
	// The engine has not seen a task of this agent yet: report its settings.
	cfg := m.eng.Config()
	ac := cfg.Agents[id]
	st := &engine.AgentStatus{ID: id, Weight: max(ac.Weight, 1), MaxInFlight: ac.MaxInFlight, Labels: ac.Labels}
	if st.MaxInFlight == 0 {
		st.MaxInFlight = cfg.AgentMaxInFlight
	}
	return st, nil
}

// stopOwnSession stops an agent's part of a session: its oldest running
// task, or with all every task it has there that has not ended. Sessions
// may be shared between agents; an agent never stops another's work.
func (r *Resolver) stopOwnSession(ctx context.Context, session, agent string, all bool) ([]string, error) {
	f := engine.TaskFilter{SessionKey: session, AgentID: agent, States: liveStates}
	if all {
		return r.eng.CancelWhere(ctx, f, "session stopped")
	}
	f.States = []engine.State{engine.StateAssigned, engine.StateRunning}
	ts, err := r.eng.Tasks(ctx, engine.TaskQuery{Filter: f, Order: engine.OldestFirst, Limit: 1})
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	if _, err := r.eng.Cancel(ctx, ts[0].ID, "session stopped"); err != nil {
		if engine.IsCode(err, engine.CodeConflict) {
			return nil, nil // it ended meanwhile
		}
		return nil, err
	}
	return []string{ts[0].ID}, nil
}

func (m *mutationResolver) Drain(ctx context.Context) (*model.Stats, error) {
	m.eng.Drain(ctx)
	m.log.Info("draining: new work is refused")
	return (*Resolver)(m).stats(ctx), nil
}

// registry returns the instance registry, or UNAVAILABLE.
func (r *Resolver) registry() (Registry, error) {
	if r.reg == nil {
		return nil, &engine.Error{Code: engine.CodeUnavailable, Message: "this server manages no browser instances"}
	}
	return r.reg, nil
}

// registryError maps the registry's errors to the API's codes.
func registryError(path, id string, err error) error {
	switch {
	case errors.Is(err, executor.ErrUnknownInstance):
		return &engine.Error{Code: engine.CodeNotFound, Message: "no instance " + strconv.Quote(id)}
	case errors.Is(err, executor.ErrDuplicateInstance):
		return &engine.Error{Code: engine.CodeConflict, Field: path + ".id", Message: "instance " + strconv.Quote(id) + " is already registered"}
	case errors.Is(err, executor.ErrNotRemovable):
		_, why, _ := strings.Cut(err.Error(), executor.ErrNotRemovable.Error()+": ")
		return &engine.Error{Code: engine.CodeConflict, Field: path, Message: "instance " + strconv.Quote(id) + " cannot be removed through the API: " + why}
	}
	// The inputs were validated above: what is left is a config the
	// registry refuses for its own reasons.
	return invalid(path, "%s", err.Error())
}

func (m *mutationResolver) RegisterInstance(ctx context.Context, input model.RegisterInstanceInput) (*model.Instance, error) {
	reg, err := (*Resolver)(m).registry()
	if err != nil {
		return nil, err
	}
	cfg, verr := instanceConfig("input", &input)
	if verr != nil {
		return nil, verr
	}
	in, err := reg.Register(ctx, cfg)
	if err != nil {
		return nil, registryError("input", input.ID, err)
	}
	m.log.Info("instance registered over the API", "instance", in.ID, "url", in.URL)
	return &model.Instance{I: in}, nil
}

func (m *mutationResolver) UpdateInstance(ctx context.Context, id string, input model.UpdateInstanceInput) (*model.Instance, error) {
	reg, err := (*Resolver)(m).registry()
	if err != nil {
		return nil, err
	}
	var u executor.InstanceUpdate
	if input.URL != nil {
		if err := checkURL("input.url", *input.URL); err != nil {
			return nil, err
		}
		u.URL = input.URL
	}
	if input.Capacity != nil && *input.Capacity < 0 {
		return nil, invalid("input.capacity", "must not be negative, got %d", *input.Capacity)
	}
	u.Token, u.Kind, u.Capacity, u.Dialect = input.Token, input.Kind, input.Capacity, input.Dialect
	if input.Labels != nil {
		labels, err := labelMap("input.labels", input.Labels)
		if err != nil {
			return nil, err
		}
		if labels == nil {
			labels = map[string]string{}
		}
		u.Labels = &labels
	}
	in, err := reg.Update(ctx, id, u)
	if err != nil {
		return nil, registryError("input", id, err)
	}
	return &model.Instance{I: in}, nil
}

func (m *mutationResolver) RemoveInstance(ctx context.Context, id string) (*model.Instance, error) {
	reg, err := (*Resolver)(m).registry()
	if err != nil {
		return nil, err
	}
	in, ok := reg.Get(ctx, id)
	if !ok {
		return nil, registryError("id", id, executor.ErrUnknownInstance)
	}
	if err := reg.Remove(ctx, id); err != nil {
		return nil, registryError("id", id, err)
	}
	m.log.Info("instance removed over the API", "instance", id)
	return &model.Instance{I: in}, nil
}

// maxItemPaths is how many items' paths itemPaths keeps ready.
const maxItemPaths = 1024

// itemPathTable holds "input.items.<i>" and "input.items.<i>.task" for the
// first maxItemPaths items: a batch's checks name them for every item
// (ADR 0005, finding 17), an error's path only now and then.
var itemPathTable = sync.OnceValue(func() (t [2][]string) {
	for i := range maxItemPaths {
		p := "input.items." + strconv.Itoa(i)
		t[0] = append(t[0], p)
		t[1] = append(t[1], p+".task")
	}
	return t
})

// itemPaths returns the paths of a batch's item i and of its task.
func itemPaths(i int) (item, task string) {
	if i < maxItemPaths {
		t := itemPathTable()
		return t[0][i], t[1][i]
	}
	item = "input.items." + strconv.Itoa(i)
	return item, item + ".task"
}
