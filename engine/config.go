package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DropPolicy decides what a full lane does with a new task.
type DropPolicy string

// Drop policies.
const (
	// DropReject refuses the new task: it is recorded REJECTED and the caller
	// gets a QUEUE_FULL error.
	DropReject DropPolicy = "reject"
	// DropOldest admits the new task and cancels the oldest queued task of the
	// scope that is full ("dropped: queue full").
	DropOldest DropPolicy = "drop-oldest"
)

// MaxSpawnDepth is the largest LaneConfig.MaxDepth: a chain of tasks that
// spawn tasks is refused past it whatever the lane says.
const MaxSpawnDepth = 10_000

// LaneConfig is a lane: a named pool with its own concurrency ceiling, queue
// cap and retry parameters.
type LaneConfig struct {
	Name        string
	MaxInFlight int           // concurrency ceiling
	MaxQueued   int           // queue cap (QUEUED + WAITING + RETRY_WAIT)
	DropPolicy  DropPolicy    // what a full queue does
	Paused      bool          // a paused lane admits but does not dispatch
	MaxDepth    int           // deepest spawn depth admitted, 1..MaxSpawnDepth (default 5)
	Retry       RetryPolicy   // the lane's retry parameters
	Timeout     time.Duration // per-attempt timeout for tasks that set none
	// Exhausted is what a task whose retry budget is spent becomes (default
	// park); a task's own TaskSpec.Exhausted overrides it.
	Exhausted Exhausted `json:",omitempty"`
	// SessionMaxQueued caps each session's queued tasks in this lane's
	// admissions (0: the engine's MaxQueuedPerSession); SessionDropPolicy is
	// what a full session does ("": the lane's DropPolicy). GoClaw drops a
	// session's oldest beyond 10: {10, drop-oldest}.
	SessionMaxQueued  int        `json:",omitempty"`
	SessionDropPolicy DropPolicy `json:",omitempty"`
	// Debounce, when positive, coalesces bursts of submissions to one
	// session (GoClaw's debounce, 800 ms there): a task of a session is
	// held WAITING this long before it queues, and a newer task of the same
	// session in this lane arriving meanwhile cancels the held one
	// ("debounced: superseded by <id>") and is held in its place. The last
	// of a burst runs. Tasks with dependencies or without a session are not
	// held. At most MaxDebounce.
	Debounce time.Duration `json:",omitempty"`
	// Pull makes a pull lane: its tasks go to external workers that lease
	// them (Engine.Pull), never to a browser instance.
	Pull bool `json:",omitempty"`
	// Removed marks a lane deleted at run time (Engine.DeleteLane): the store
	// keeps it so, so that the removal survives a restart.
	Removed bool `json:",omitempty"`
}

// Exhausted says what becomes of a task whose retry budget is spent (or
// whose retry policy answers "park").
type Exhausted string

// Exhausted modes. Either way nothing waits on the task any longer: its
// dependents are cancelled, it counts as ended for its batch, and its
// webhook is sent.
const (
	// ExhaustedPark keeps the task PARKED, for an operator to reset (CW's
	// choice). A reset runs it again with a fresh budget; its dependents
	// stay cancelled (a terminal state never changes), and its batch, once
	// ended, stays ended.
	ExhaustedPark Exhausted = "park"
	// ExhaustedFail ends the task FAILED (BrowserOS's choice).
	ExhaustedFail Exhausted = "fail"
)

// Validate checks the mode ("" means the default, or the lane's).
func (x Exhausted) Validate() error {
	if x != "" && x != ExhaustedPark && x != ExhaustedFail {
		return fmt.Errorf("exhausted: %q is neither %q nor %q", x, ExhaustedPark, ExhaustedFail)
	}
	return nil
}

// DefaultLanes returns the built-in lanes: main (30), subagent (50), team (100)
// and cron (30).
func DefaultLanes() []LaneConfig {
	mk := func(name string, n int) LaneConfig {
		l := NewLane(name)
		l.MaxInFlight = n
		return l
	}
	return []LaneConfig{mk("main", 30), mk("subagent", 50), mk("team", 100), mk("cron", 30)}
}

// NewLane returns a lane with every setting at its default: 30 in flight,
// 100,000 queued, reject when full, depth 5, the default timeout and retry
// policy, park when retries are spent.
func NewLane(name string) LaneConfig {
	return LaneConfig{
		Name: name, MaxInFlight: 30, MaxQueued: 100_000, DropPolicy: DropReject,
		MaxDepth: 5, Retry: DefaultRetryPolicy(), Timeout: DefaultTimeout, Exhausted: ExhaustedPark,
	}
}

// DefaultTimeout is the per-attempt timeout of a task that sets none.
const DefaultTimeout = 60 * time.Second

// Chat tasks' timeouts by default: 120 s unless the task sets one, at most
// 600 s (BrowserOS's).
const (
	DefaultChatTimeout    = 120 * time.Second
	DefaultChatMaxTimeout = 600 * time.Second
)

// DefaultRetryPolicy returns 4 attempts with 1 s backoff doubling up to 60 s,
// without jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 4, Backoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute}
}

// AgentConfig overrides the defaults for one agent.
type AgentConfig struct {
	Weight      int // share of concurrency relative to other agents (default 1)
	MaxInFlight int // the agent's ceiling (default Config.AgentMaxInFlight)
	// Labels are free-form key=value labels that policies see (ABI v2
	// details: policy.AgentInfo.Labels); at most 64, keys 1..256 bytes,
	// values at most 256, as a task's.
	Labels map[string]string `json:",omitempty"`
}

// Config holds the engine's limits and defaults. The zero value of a field
// means its default; call Validate (New does) to fill them in.
type Config struct {
	Lanes []LaneConfig // default DefaultLanes()

	MaxInFlight         int // global ceiling (default 256)
	MaxQueued           int // global queue cap (default 1,000,000)
	MaxQueuedPerAgent   int // per-agent queue cap (default 100,000)
	MaxQueuedPerSession int // per-session queue cap (default 10,000)
	AgentMaxInFlight    int // per-agent ceiling (default 10)
	SessionMaxInFlight  int // per-session ceiling (default 1)
	Agents              map[string]AgentConfig

	// AgingThreshold: a queue head waiting this long goes before any
	// fairness ordering (default 30 s; negative disables aging).
	AgingThreshold time.Duration
	// LeaseGrace is added to an attempt's timeout to form its lease: an
	// executor that has not returned by then has its attempt reclaimed
	// (default 10 s).
	LeaseGrace time.Duration
	// Retention is how long terminal tasks are kept (default 24 h).
	Retention time.Duration
	// EventBuffer is the number of recent events kept in memory for
	// subscribers that resume (default 65,536; rounded up to a power of two).
	EventBuffer int
	// FairnessCandidates caps how many queue heads a fairness plugin sees per
	// decision (default 64).
	FairnessCandidates int
	// MaxBatch caps the items of one SubmitBatch (default 100).
	MaxBatch int
	// InstanceFaultBudget is how many attempts of a task may end in an
	// instance fault (ErrInstanceFault) without consuming its attempt budget
	// (default 30; negative: none, every fault counts). A fault after which
	// the action may have run (ErrMayHaveRun) always counts for a task that
	// allows a single attempt.
	InstanceFaultBudget int
	// InstanceFaultDelay is the wait before the retry of an attempt that ended
	// in an instance fault, or the lane's backoff when that is longer
	// (default 1 s).
	InstanceFaultDelay time.Duration
	// CommitTimeout bounds how long a call waits for its changes to be
	// committed by a durable store before it answers UNAVAILABLE (default
	// 10 s). The changes stay pending and are committed once the store
	// accepts them again; a submission resent with its idempotency key finds
	// its task. While commits have been failing for longer than this,
	// submissions are refused at once.
	CommitTimeout time.Duration
	// ChatTimeout is the per-attempt timeout of a chat task (one with an
	// instruction) that sets none, when its lane's is shorter (default
	// 120 s, as BrowserOS). ChatMaxTimeout caps what a chat task may ask
	// for (default 600 s).
	ChatTimeout    time.Duration
	ChatMaxTimeout time.Duration
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate fills in defaults and checks every field, naming the first bad one.
func (c *Config) Validate() error {
	if len(c.Lanes) == 0 {
		c.Lanes = DefaultLanes()
	}
	orDefault(&c.MaxInFlight, 256)
	orDefault(&c.MaxQueued, 1_000_000)
	orDefault(&c.MaxQueuedPerAgent, 100_000)
	orDefault(&c.MaxQueuedPerSession, 10_000)
	orDefault(&c.AgentMaxInFlight, 10)
	orDefault(&c.SessionMaxInFlight, 1)
	orDefault(&c.AgingThreshold, 30*time.Second)
	orDefault(&c.LeaseGrace, 10*time.Second)
	orDefault(&c.Retention, 24*time.Hour)
	orDefault(&c.EventBuffer, 1<<16)
	orDefault(&c.FairnessCandidates, 64)
	orDefault(&c.MaxBatch, 100)
	orDefault(&c.InstanceFaultBudget, 30)
	orDefault(&c.InstanceFaultDelay, time.Second)
	orDefault(&c.CommitTimeout, 10*time.Second)
	orDefault(&c.ChatTimeout, DefaultChatTimeout)
	orDefault(&c.ChatMaxTimeout, DefaultChatMaxTimeout)
	for name, v := range map[string]int{
		"maxInFlight": c.MaxInFlight, "maxQueued": c.MaxQueued,
		"maxQueuedPerAgent": c.MaxQueuedPerAgent, "maxQueuedPerSession": c.MaxQueuedPerSession,
		"agentMaxInFlight": c.AgentMaxInFlight, "sessionMaxInFlight": c.SessionMaxInFlight,
		"eventBuffer": c.EventBuffer, "fairnessCandidates": c.FairnessCandidates, "maxBatch": c.MaxBatch,
	} {
		if v < 0 {
			return fmt.Errorf("%s: must not be negative, got %d", name, v)
		}
	}
	if c.FairnessCandidates > 1024 {
		return fmt.Errorf("fairnessCandidates: at most 1024, got %d", c.FairnessCandidates)
	}
	if c.ChatTimeout < 0 || c.ChatMaxTimeout < c.ChatTimeout {
		return fmt.Errorf("chatTimeout and chatMaxTimeout: must not be negative, and the maximum at least the default")
	}
	if c.LeaseGrace < 0 || c.Retention < 0 || c.CommitTimeout < 0 {
		return fmt.Errorf("leaseGrace, retention and commitTimeout must not be negative")
	}
	seen := map[string]bool{}
	for i := range c.Lanes {
		l := &c.Lanes[i]
		if err := l.validate(); err != nil {
			return fmt.Errorf("lanes[%d]: %w", i, err)
		}
		if seen[l.Name] {
			return fmt.Errorf("lanes[%d].name: duplicate lane %q", i, l.Name)
		}
		seen[l.Name] = true
	}
	for id, a := range c.Agents {
		if a.Weight < 0 || a.MaxInFlight < 0 {
			return fmt.Errorf("agents.%s: weight and maxInFlight must not be negative", id)
		}
		if err := checkLabels(a.Labels); err != nil {
			return fmt.Errorf("agents.%s.%w", id, err)
		}
	}
	return nil
}

func (l *LaneConfig) validate() error {
	if !ValidLaneName(l.Name) {
		return fmt.Errorf("name: %q is not a lane name (letters, digits, '-' and '_', at most 64)", l.Name)
	}
	orDefault(&l.MaxQueued, 100_000)
	orDefault(&l.DropPolicy, DropReject)
	orDefault(&l.MaxDepth, 5)
	orDefault(&l.Timeout, DefaultTimeout)
	orDefault(&l.Exhausted, ExhaustedPark)
	if l.Retry == (RetryPolicy{}) {
		l.Retry = DefaultRetryPolicy()
	}
	if l.MaxDepth < 0 || l.MaxDepth > MaxSpawnDepth {
		return fmt.Errorf("maxDepth: must be within 1..%d, got %d", MaxSpawnDepth, l.MaxDepth)
	}
	if l.MaxInFlight < 0 {
		return fmt.Errorf("maxInFlight: must not be negative, got %d", l.MaxInFlight)
	}
	if l.MaxQueued < 0 {
		return fmt.Errorf("maxQueued: must not be negative, got %d", l.MaxQueued)
	}
	if l.DropPolicy != DropReject && l.DropPolicy != DropOldest {
		return fmt.Errorf("dropPolicy: %q is neither %q nor %q", l.DropPolicy, DropReject, DropOldest)
	}
	if l.Timeout < 0 {
		return fmt.Errorf("timeout: must not be negative")
	}
	if err := l.Exhausted.Validate(); err != nil {
		return err
	}
	if l.Debounce < 0 || l.Debounce > MaxDebounce {
		return fmt.Errorf("debounce: must be within 0..%s, got %s", MaxDebounce, l.Debounce)
	}
	if l.SessionMaxQueued < 0 {
		return fmt.Errorf("sessionMaxQueued: must not be negative, got %d", l.SessionMaxQueued)
	}
	if p := l.SessionDropPolicy; p != "" && p != DropReject && p != DropOldest {
		return fmt.Errorf("sessionDropPolicy: %q is neither %q nor %q", p, DropReject, DropOldest)
	}
	if err := l.Retry.Validate(); err != nil {
		return fmt.Errorf("retry.%w", err)
	}
	return nil
}

// Validate checks a retry policy's parameters.
func (p *RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1 || p.MaxAttempts > 100:
		return fmt.Errorf("maxAttempts: must be within 1..100, got %d", p.MaxAttempts)
	case p.Backoff < 0 || p.Backoff > 24*time.Hour:
		return fmt.Errorf("backoff: must be within 0..24h, got %s", p.Backoff)
	case p.Multiplier != 0 && (p.Multiplier < 1 || p.Multiplier > 100):
		return fmt.Errorf("multiplier: must be within 1..100, got %g", p.Multiplier)
	case p.MaxBackoff < 0 || p.MaxBackoff > 24*time.Hour:
		return fmt.Errorf("maxBackoff: must be within 0..24h, got %s", p.MaxBackoff)
	}
	return nil
}

// ValidLaneName reports whether s can name a lane: 1 to 64 letters, digits,
// '-' and '_'.
func ValidLaneName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// LaneEnvPrefix starts the environment variables that override lanes.
const LaneEnvPrefix = "SWITCHYARD_LANE_"

// ApplyLaneEnv applies SWITCHYARD_LANE_<NAME> variables from environ (in
// os.Environ form) to lanes. The value is either a number, the lane's
// concurrency ceiling, or comma-separated settings:
// "inflight=40,queue=5000,drop=drop-oldest,paused=false,depth=5,timeout=30s,
// attempts=3,backoff=200ms,multiplier=2,maxbackoff=1m,jitter=true,exhausted=fail,
// sessionqueue=10,sessiondrop=drop-oldest,pull=true";
// a setting left out keeps the lane's value. A variable for an unknown lane
// creates it with NewLane's defaults. The lane name is the variable's
// suffix in lower case, with '_' kept (SWITCHYARD_LANE_BULK_JOBS → bulk_jobs).
func ApplyLaneEnv(lanes []LaneConfig, environ []string) ([]LaneConfig, error) {
	out := slices.Clone(lanes)
	for _, kv := range environ {
		key, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(key, LaneEnvPrefix) {
			continue
		}
		name := strings.ToLower(strings.TrimPrefix(key, LaneEnvPrefix))
		i := slices.IndexFunc(out, func(l LaneConfig) bool { return l.Name == name })
		if i < 0 {
			out = append(out, NewLane(name))
			i = len(out) - 1
		}
		if err := parseLaneSettings(&out[i], val); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return out, nil
}

func parseLaneSettings(l *LaneConfig, val string) error {
	val = strings.TrimSpace(val)
	if n, err := strconv.Atoi(val); err == nil {
		if n < 0 {
			return fmt.Errorf("inflight: must not be negative, got %d", n)
		}
		l.MaxInFlight = n
		return nil
	}
	for _, part := range strings.Split(val, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%q: want key=value", part)
		}
		var err error
		switch k {
		case "inflight":
			l.MaxInFlight, err = strconv.Atoi(v)
		case "queue":
			l.MaxQueued, err = strconv.Atoi(v)
		case "drop":
			l.DropPolicy = DropPolicy(v)
		case "paused":
			l.Paused, err = strconv.ParseBool(v)
		case "depth":
			l.MaxDepth, err = strconv.Atoi(v)
		case "timeout":
			l.Timeout, err = time.ParseDuration(v)
		case "attempts":
			l.Retry.MaxAttempts, err = strconv.Atoi(v)
		case "backoff":
			l.Retry.Backoff, err = time.ParseDuration(v)
		case "multiplier":
			l.Retry.Multiplier, err = strconv.ParseFloat(v, 64)
		case "maxbackoff":
			l.Retry.MaxBackoff, err = time.ParseDuration(v)
		case "jitter":
			l.Retry.Jitter, err = strconv.ParseBool(v)
		case "exhausted":
			l.Exhausted = Exhausted(v)
		case "sessionqueue":
			l.SessionMaxQueued, err = strconv.Atoi(v)
		case "sessiondrop":
			l.SessionDropPolicy = DropPolicy(v)
		case "pull":
			l.Pull, err = strconv.ParseBool(v)
		case "debounce":
			l.Debounce, err = time.ParseDuration(v)
		default:
			return fmt.Errorf("unknown setting %q (want inflight, queue, drop, paused, depth, timeout, attempts, backoff, multiplier, maxbackoff, jitter, exhausted, sessionqueue, sessiondrop, pull or debounce)", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, laneValueError(v, err))
		}
	}
	return nil
}

// laneValueError says what a setting's value should have been, without
// strconv's wording ("strconv.Atoi: parsing …").
func laneValueError(v string, err error) error {
	var ne *strconv.NumError
	if !errors.As(err, &ne) {
		return fmt.Errorf("%q is not a duration (e.g. 30s, 5m)", v)
	}
	switch {
	case errors.Is(ne.Err, strconv.ErrRange):
		return fmt.Errorf("%q is out of range", v)
	case ne.Func == "ParseBool":
		return fmt.Errorf("%q is not true or false", v)
	case ne.Func == "ParseFloat":
		return fmt.Errorf("%q is not a number", v)
	}
	return fmt.Errorf("%q is not an integer", v)
}
