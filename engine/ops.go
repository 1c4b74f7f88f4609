package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
)

// Live changes an operator makes: lanes, agents, instances and policies.
// Each takes effect between two dispatch decisions and is recorded.

var defaultRetry = backoff.Retry{}

// LaneUpdate changes some of a lane's settings; nil fields stay as they are.
type LaneUpdate struct {
	MaxInFlight *int
	MaxQueued   *int
	DropPolicy  *DropPolicy
	Paused      *bool
	MaxDepth    *int
	Timeout     *time.Duration
	Retry       *RetryPolicy
	Exhausted   *Exhausted
	// SessionMaxQueued and SessionDropPolicy: see LaneConfig.
	SessionMaxQueued  *int
	SessionDropPolicy *DropPolicy
	Debounce          *time.Duration // see LaneConfig.Debounce
	// Pull makes it a pull lane (LaneConfig.Pull) or a lane of instances.
	Pull *bool
	// Create makes a lane that does not exist (from NewLane's defaults and
	// the fields given) instead of answering NOT_FOUND; an existing lane is
	// a CONFLICT. Remove deletes a lane that has no live task (else
	// CONFLICT), and ignores the other fields. Both are stored: lanes made
	// or removed at run time stay so after a restart.
	Create bool
	Remove bool
}

// CreateLane makes a lane at run time (GoClaw's get-or-create, made
// explicit): UpdateLane with Create.
func (e *Engine) CreateLane(ctx context.Context, name string, u LaneUpdate) (LaneStatus, error) {
	u.Create, u.Remove = true, false
	return e.UpdateLane(ctx, name, u)
}

// DeleteLane removes a lane that has no live task: UpdateLane with Remove.
func (e *Engine) DeleteLane(ctx context.Context, name string) (LaneStatus, error) {
	return e.UpdateLane(ctx, name, LaneUpdate{Remove: true})
}

// UpdateLane changes a lane's settings live. Raising a ceiling or resuming a
// lane dispatches at once what it allows; lowering a ceiling lets the tasks
// in flight finish and admits no more until the lane is under it. With
// Create or Remove it makes or deletes the lane. A ctx that has ended
// changes nothing (on a cluster, ctx also bounds the trip to the leader).
func (e *Engine) UpdateLane(ctx context.Context, name string, u LaneUpdate) (LaneStatus, error) {
	if err := ctx.Err(); err != nil {
		return LaneStatus{}, err
	}
	var st LaneStatus
	err := e.mutate(func(c *core) (err error) {
		st, err = c.updateLaneLocked(name, u)
		return err
	})
	return st, err
}

// updateLaneLocked is UpdateLane on the core.
func (c *core) updateLaneLocked(name string, u LaneUpdate) (LaneStatus, error) {
	l := c.laneByName[name]
	switch {
	case u.Create && l != nil:
		return LaneStatus{}, conflict("lane %q exists already", name)
	case l == nil && !u.Create:
		return LaneStatus{}, notFound("no lane %q", name)
	case u.Remove:
		return c.removeLaneLocked(l)
	}
	var cfg LaneConfig
	if l != nil {
		cfg = l.cfg
	} else {
		if !ValidLaneName(name) {
			return LaneStatus{}, invalid("name", "%q is not a lane name (letters, digits, '-' and '_', at most 64)", name)
		}
		cfg = NewLane(name)
	}
	if u.MaxInFlight != nil {
		cfg.MaxInFlight = *u.MaxInFlight
	}
	if u.MaxQueued != nil {
		cfg.MaxQueued = *u.MaxQueued
	}
	if u.DropPolicy != nil {
		cfg.DropPolicy = *u.DropPolicy
	}
	if u.Paused != nil {
		cfg.Paused = *u.Paused
	}
	if u.MaxDepth != nil {
		cfg.MaxDepth = *u.MaxDepth
	}
	if u.Timeout != nil {
		cfg.Timeout = *u.Timeout
	}
	if u.Retry != nil {
		cfg.Retry = *u.Retry
	}
	if u.Exhausted != nil {
		cfg.Exhausted = *u.Exhausted
	}
	if u.SessionMaxQueued != nil {
		cfg.SessionMaxQueued = *u.SessionMaxQueued
	}
	if u.SessionDropPolicy != nil {
		cfg.SessionDropPolicy = *u.SessionDropPolicy
	}
	if u.Debounce != nil {
		cfg.Debounce = *u.Debounce
	}
	if u.Pull != nil {
		if l != nil && *u.Pull != cfg.Pull {
			if err := c.checkPullSwitchLocked(l, *u.Pull); err != nil {
				return LaneStatus{}, err
			}
		}
		cfg.Pull = *u.Pull
	}
	if err := cfg.validate(); err != nil {
		field, msg, ok := strings.Cut(err.Error(), ": ")
		if !ok {
			field, msg = "input", err.Error()
		}
		return LaneStatus{}, invalid(field, "%s", msg)
	}
	if cfg.MaxQueued == 0 || u.MaxDepth != nil && *u.MaxDepth == 0 {
		return LaneStatus{}, invalid("maxQueued", "the queue cap and the maximum depth must be positive")
	}
	reason := describeLane(cfg)
	if l == nil {
		l = c.reviveLaneLocked(cfg)
		reason = "created " + reason
	}
	l.cfg = cfg
	c.cur.lanes = append(c.cur.lanes, cfg)
	c.seq++
	c.cur.events = append(c.cur.events, Event{Seq: c.seq, At: c.now(), Type: EventLane, Lane: name, Reason: reason})
	st := LaneStatus{Config: l.cfg, InFlight: l.inflight, Pending: l.queued, Selection: l.selection.name, Retry: l.retry.name}
	return st, nil
}

// checkPullSwitchLocked refuses to turn a lane into a pull lane, or back
// into a lane of instances, while it holds tasks that have not ended: they
// were admitted for the other kind of lane (a pull lane takes any action
// kind, which a browser refuses; a task running on an instance has no lease
// for a worker to end), so switching would fail them or strand them. The
// operator drains the lane first (or cancels what is left); then the switch
// is immediate and loses nothing.
func (c *core) checkPullSwitchLocked(l *lane, pull bool) error {
	live := len(c.matchLiveLocked(TaskFilter{Lane: l.cfg.Name}))
	if live == 0 && l.inflight == 0 {
		return nil
	}
	what := "a lane of browser instances"
	if pull {
		what = "a pull lane"
	}
	n := max(live, l.inflight)
	tasks := fmt.Sprintf("%d tasks that have not ended", n)
	if n == 1 {
		tasks = "1 task that has not ended"
	}
	return &Error{Code: CodeConflict, Field: "pull", Message: fmt.Sprintf(
		"lane %q still has %s: it can become %s only once they have (let them finish, or cancel them)", l.cfg.Name, tasks, what)}
}

// reviveLaneLocked gives a new lane cfg the struct of a removed lane of the
// same name, if any (its index stays with the agents' queues), else a new
// one.
func (c *core) reviveLaneLocked(cfg LaneConfig) *lane {
	for _, l := range c.lanes {
		if l.cfg.Removed && l.cfg.Name == cfg.Name {
			l.cfg = cfg
			c.laneByName[cfg.Name] = l
			return l
		}
	}
	return c.addLane(cfg)
}

// removeLaneLocked deletes an empty lane.
func (c *core) removeLaneLocked(l *lane) (LaneStatus, error) {
	name := l.cfg.Name
	if live := len(c.matchLiveLocked(TaskFilter{Lane: name})); live > 0 || l.inflight > 0 {
		return LaneStatus{}, conflict("lane %q still has %d live tasks: cancel them or let them end first", name, live)
	}
	if c.liveLanesLocked() == 1 {
		return LaneStatus{}, conflict("lane %q is the last lane", name)
	}
	st := LaneStatus{Config: l.cfg, Selection: l.selection.name, Retry: l.retry.name}
	l.cfg.Removed = true
	delete(c.laneByName, name)
	c.cur.lanes = append(c.cur.lanes, l.cfg) // the tombstone: the removal survives a restart
	// The lane's own policy choices go with it, in the same batch as the
	// tombstone, so no store holds one without the other: a choice left
	// behind would keep its plugin in use, could not be cleared (no such
	// lane), and would pass to a new lane of the same name.
	l.selection, l.retry = c.selection, c.retry
	for _, slot := range []policy.Slot{policy.SlotSelection, policy.SlotRetry} {
		if key := policyKey(slot, name); c.settings[key] != nil {
			c.putSettingLocked(key, nil)
		}
	}
	c.seq++
	c.cur.events = append(c.cur.events, Event{Seq: c.seq, At: c.now(), Type: EventLane, Lane: name, Reason: "lane " + name + " removed"})
	return st, nil
}

// liveLanesLocked counts the lanes that are not removed.
func (c *core) liveLanesLocked() int { return len(c.laneByName) }

func describeLane(c LaneConfig) string {
	state := "running"
	if c.Paused {
		state = "paused"
	}
	if c.Pull {
		state += " (pull)"
	}
	return fmt.Sprintf("lane %s %s: maxInFlight=%d maxQueued=%d drop=%s", c.Name, state, c.MaxInFlight, c.MaxQueued, c.DropPolicy)
}

// SetAgent changes an agent's weight, ceiling and labels live (0 keeps a
// value, nil Labels keep the labels, an empty map clears them).
func (e *Engine) SetAgent(ctx context.Context, id string, ac AgentConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ac.Weight < 0 || ac.MaxInFlight < 0 {
		return invalid("weight", "weight and maxInFlight must not be negative")
	}
	if err := checkLabels(ac.Labels); err != nil {
		return err
	}
	if ac.Labels != nil {
		ac.Labels = maps.Clone(ac.Labels)
	}
	return e.mutate(func(c *core) error {
		if c.cfg.Agents == nil {
			c.cfg.Agents = map[string]AgentConfig{}
		}
		cur := c.cfg.Agents[id]
		if ac.Weight > 0 {
			cur.Weight = ac.Weight
		}
		if ac.MaxInFlight > 0 {
			cur.MaxInFlight = ac.MaxInFlight
		}
		if ac.Labels != nil {
			cur.Labels = ac.Labels
			if len(cur.Labels) == 0 {
				cur.Labels = nil
			}
		}
		c.cfg.Agents[id] = cur
		if a := c.agents[id]; a != nil {
			if cur.Weight > 0 {
				a.weight = cur.Weight
			}
			if cur.MaxInFlight > 0 {
				a.limit = cur.MaxInFlight
			}
			a.labels = policy.MakeLabels(cur.Labels)
			c.agentChangedLocked(a)
		}
		v, _ := json.Marshal(cur)
		c.putSettingLocked("agent/"+id, v)
		return nil
	})
}

// SetInstance adds or updates an instance (engine.InstanceSink).
func (e *Engine) SetInstance(info InstanceInfo) {
	_ = e.mutate(func(c *core) error {
		in := c.instances[info.ID]
		if in == nil {
			in = &instance{}
			c.instances[info.ID] = in
		}
		if in.removed || in.info.ID == "" {
			in.removed = false
			c.instList = append(c.instList, in)
			in.info = info
			slices.SortFunc(c.instList, func(a, b *instance) int { return strings.Compare(a.info.ID, b.info.ID) })
		}
		in.info = info
		in.lim.limit = max(info.Capacity, 0)
		c.wakeLocked(&in.lim)
		c.wakeLocked(&c.pool)
		return nil
	})
}

// RemoveInstance forgets an instance (engine.InstanceSink). Attempts running
// on it keep their slots until they finish (and count if the instance comes
// back). A session bound to a tab there has lost its page: an EventSession
// says so, and the session's next task fails with SESSION_LOST rather than
// running in a blank tab elsewhere.
func (e *Engine) RemoveInstance(id string) {
	_ = e.mutate(func(c *core) error {
		in := c.instances[id]
		if in != nil && !in.removed {
			in.removed = true
			c.instList = slices.DeleteFunc(c.instList, func(x *instance) bool { return x == in })
			if in.lim.inflight == 0 {
				delete(c.instances, id)
			}
			var lost []string
			for k, b := range c.bindings {
				if b.instance == id && !b.lost {
					lost = append(lost, k)
				}
			}
			slices.Sort(lost) // events in a stable order
			for _, k := range lost {
				b := c.bindings[k]
				b.lost = true
				c.setBindingLocked(k, b)
				c.emitSessionLocked(k, SessionLabel(k)+" lost its tab "+b.tab+": instance "+id+" was removed; its next task fails with SESSION_LOST, or replays the session if it asked")
			}
			c.wakeLocked(&in.lim) // its waiters look again: elsewhere, or fail in the executor
		}
		return nil
	})
}

// UnbindSession forgets the tab bound to a session (engine.InstanceSink).
func (e *Engine) UnbindSession(key string) {
	_ = e.mutate(func(c *core) error {
		c.dropBindingLocked(key)
		return nil
	})
}

// InstanceLoad returns the number of attempts in flight on each instance.
func (e *Engine) InstanceLoad() map[string]int {
	var out map[string]int
	e.view(func(c *core) { out = c.instanceLoadLocked() })
	return out
}

// instanceLoadLocked is InstanceLoad on the core.
func (c *core) instanceLoadLocked() map[string]int {
	out := make(map[string]int, len(c.instances))
	for id, in := range c.instances {
		out[id] = in.lim.inflight
	}
	return out
}

// PolicyAssignment says which policy fills a slot, globally (Lane "") or for
// one lane.
type PolicyAssignment struct {
	Slot policy.Slot
	Lane string
	Name string
}

// SetSelection makes p the selection policy of a lane, or of every lane
// without its own when lane is "". Tasks already queued keep their rank; new
// ones are ranked by p.
func (e *Engine) SetSelection(lane, name string, p policy.Selection) error {
	return e.setPolicy(policy.SlotSelection, lane, name, p)
}

// SetRetry makes p the retry policy of a lane, or of every lane without its
// own when lane is "".
func (e *Engine) SetRetry(lane, name string, p policy.Retry) error {
	return e.setPolicy(policy.SlotRetry, lane, name, p)
}

// SetFairness makes p the fairness policy (fairness is global). The built-in
// *fairshare.Fairness takes the engine's native fast path.
func (e *Engine) SetFairness(name string, p policy.Fairness) error {
	return e.setPolicy(policy.SlotFairness, "", name, p)
}

// SetDefaultPolicy makes p the global policy of slot without storing it as a
// choice: it is what a server starts with, so a restart (perhaps with other
// defaults) applies its own defaults again and then the stored choices.
func (e *Engine) SetDefaultPolicy(slot policy.Slot, name string, p any) error {
	return e.setPolicyAs(slot, "", name, p, false)
}

// ResetPolicy makes p, the server's default, the global policy of slot
// again and drops the stored global choice, in one change: a restart
// applies its own default there (native or WebAssembly, as it is started).
func (e *Engine) ResetPolicy(slot policy.Slot, name string, p any) error {
	return e.mutate(func(c *core) error {
		if err := c.setPolicyLocked(slot, "", name, p, false); err != nil {
			return err
		}
		if key := policyKey(slot, ""); c.settings[key] != nil {
			c.putSettingLocked(key, nil)
		}
		return nil
	})
}

func (e *Engine) setPolicy(slot policy.Slot, laneName, name string, p any) error {
	return e.setPolicyAs(slot, laneName, name, p, true)
}

// setPolicyAs assigns a policy; persist stores the assignment as a setting
// that the plugin manager reapplies at start.
func (e *Engine) setPolicyAs(slot policy.Slot, laneName, name string, p any, persist bool) error {
	return e.mutate(func(c *core) error { return c.setPolicyLocked(slot, laneName, name, p, persist) })
}

// setPolicyLocked assigns a policy (setPolicyAs), and persist keeps the
// assignment as a setting.
func (c *core) setPolicyLocked(slot policy.Slot, laneName, name string, p any, persist bool) error {
	if p == nil || name == "" {
		return invalid("policy", "a policy and its name are required")
	}
	var l *lane
	if laneName != "" {
		if l = c.laneByName[laneName]; l == nil {
			return notFound("no lane %q", laneName)
		}
	}
	switch slot {
	case policy.SlotSelection, policy.SlotRetry:
		var ok bool
		if slot == policy.SlotSelection {
			ok = assign(c.lanes, l, &c.selection, func(x *lane) *namedSelection { return &x.selection }, name, p)
		} else {
			ok = assign(c.lanes, l, &c.retry, func(x *lane) *namedRetry { return &x.retry }, name, p)
		}
		if !ok {
			return invalid("policy", "%s is not a %s policy", name, slot)
		}
	case policy.SlotFairness:
		fp, ok := p.(policy.Fairness)
		if !ok || l != nil {
			return invalid("policy", "%s: fairness is global and needs a fairness policy", name)
		}
		if nf, isNative := fp.(*fairshare.Fairness); isNative {
			c.native = nf
		}
		sr, ok := fp.(policy.StateReporter)
		// A policy that may hold is asked even about a single candidate.
		h, holds := fp.(policy.Holder)
		c.fairness = namedFairness{name: name, p: fp, stateless: ok && sr.Stateless() && !(holds && h.MayHold()), inline: inline(fp),
			details: policy.UsesDetails(fp)}
		// The policy that held is gone: every hold ends now, pushed
		// dispatch's and each pull lane's, not at the scope's next
		// decision (a pull lane's might come much later, and the same
		// name set again must not revive it).
		c.clearHoldsLocked()
	default:
		return invalid("slot", "unknown slot %d", slot)
	}
	if persist {
		v, _ := json.Marshal(map[string]string{"name": name})
		c.putSettingLocked(policyKey(slot, laneName), v)
	}
	c.emitEngineLocked(fmt.Sprintf("%s policy %s set for %s", slot, name, laneOrAll(laneName)))
	return nil
}

// assign makes p, when it is a P, the policy of a slot: lane l's own, or
// with l nil the global one, which every one of lanes without its own
// follows. field is the slot's place in a lane.
func assign[P any](lanes []*lane, l *lane, global *named[P], field func(*lane) *named[P], name string, p any) bool {
	pp, ok := p.(P)
	if !ok {
		return false
	}
	n := named[P]{name: name, p: pp, inline: inline(pp), gen: policyGens.Add(1)}
	if l != nil {
		n.own = true
		*field(l) = n
		return true
	}
	*global = n
	for _, x := range lanes {
		if f := field(x); !f.own {
			*f = n
		}
	}
	return true
}

// policyKey is the setting that stores an operator's choice of policy for
// slot: the global one (lane "") or a lane's own.
func policyKey(slot policy.Slot, lane string) string {
	key := "policy/" + slot.String()
	if lane != "" {
		key += "/" + lane
	}
	return key
}

// ClearLanePolicy makes a lane use the global policy of slot again. A
// stored choice for a lane that no longer exists (one an older version left
// behind when the lane was deleted) is dropped; with none, a lane that does
// not exist is NOT_FOUND.
func (e *Engine) ClearLanePolicy(slot policy.Slot, lane string) error {
	return e.mutate(func(c *core) error {
		l := c.laneByName[lane]
		if l == nil {
			key := policyKey(slot, lane)
			if lane == "" || c.settings[key] == nil {
				return notFound("no lane %q", lane)
			}
			c.putSettingLocked(key, nil)
			c.emitEngineLocked(fmt.Sprintf("stored %s policy choice of lane %s, which no longer exists, dropped", slot, lane))
			return nil
		}
		switch slot {
		case policy.SlotSelection:
			l.selection = c.selection
		case policy.SlotRetry:
			l.retry = c.retry
		default:
			return invalid("slot", "only selection and retry are set per lane")
		}
		c.putSettingLocked(policyKey(slot, lane), nil)
		c.emitEngineLocked(fmt.Sprintf("%s policy of lane %s back to the global one", slot, lane))
		return nil
	})
}

func laneOrAll(lane string) string {
	if lane == "" {
		return "all lanes"
	}
	return "lane " + lane
}

// Policies returns the active policy of every slot: the global ones, then
// each lane's own.
func (e *Engine) Policies(_ context.Context) []PolicyAssignment {
	var out []PolicyAssignment
	e.view(func(c *core) { out = c.policiesLocked() })
	return out
}

// policiesLocked is Policies on the core.
func (c *core) policiesLocked() []PolicyAssignment {
	out := []PolicyAssignment{
		{Slot: policy.SlotSelection, Name: c.selection.name},
		{Slot: policy.SlotFairness, Name: c.fairness.name},
		{Slot: policy.SlotRetry, Name: c.retry.name},
	}
	for _, l := range c.lanes {
		if l.cfg.Removed {
			continue
		}
		if l.selection.own {
			out = append(out, PolicyAssignment{Slot: policy.SlotSelection, Lane: l.cfg.Name, Name: l.selection.name})
		}
		if l.retry.own {
			out = append(out, PolicyAssignment{Slot: policy.SlotRetry, Lane: l.cfg.Name, Name: l.retry.name})
		}
	}
	return out
}
