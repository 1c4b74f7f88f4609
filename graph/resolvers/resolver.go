// Package resolvers implements Switchyard's GraphQL schema over the engine
// and the instance registry: queries read the engine's snapshots, mutations
// validate their input and call the engine, subscriptions read the engine's
// event log through graph/eventstream, one reader per subscriber.
package resolvers

import (
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/eventstream"
	"github.com/switchyard/switchyard/graph/generated"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/netguard"
)

// Limits are the request limits a server applies; Query.server reports
// them, and the resolvers enforce the ones that concern them.
type Limits struct {
	MaxComplexity            int // query complexity
	MaxDepth                 int // query depth
	MaxBodyBytes             int // HTTP request body
	MaxWebSocketPayloadBytes int // one WebSocket message from a client
	MaxSubscriberLag         int // events a live subscriber may fall behind
	// MaxSubscriptionsPerConnection is how many subscriptions one WebSocket
	// connection may hold at once.
	MaxSubscriptionsPerConnection int
	// MutationsPerSecond is each token's sustained rate of mutations
	// (negative: no limit); MutationBurst the most at once. Without tokens
	// they are the rate of every caller together (auth.Anonymous).
	MutationsPerSecond float64
	MutationBurst      int
	// BodyTimeout is how long an HTTP request's body may take to arrive.
	BodyTimeout time.Duration
}

// Default limits.
const (
	DefaultMaxComplexity            = 20_000
	DefaultMaxDepth                 = 15
	DefaultMaxBodyBytes             = 4 << 20
	DefaultMaxWebSocketPayloadBytes = 1 << 20
	DefaultMaxSubscriberLag         = eventstream.DefaultMaxLag
	DefaultMaxSubscriptionsPerConn  = 100
	DefaultMutationsPerSecond       = 100
	DefaultMutationBurst            = 200
	DefaultBodyTimeout              = 30 * time.Second
)

// WithDefaults fills in the zero limits.
func (l Limits) WithDefaults() Limits {
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxComplexity, DefaultMaxComplexity)
	set(&l.MaxDepth, DefaultMaxDepth)
	set(&l.MaxBodyBytes, DefaultMaxBodyBytes)
	set(&l.MaxWebSocketPayloadBytes, DefaultMaxWebSocketPayloadBytes)
	set(&l.MaxSubscriberLag, DefaultMaxSubscriberLag)
	set(&l.MaxSubscriptionsPerConnection, DefaultMaxSubscriptionsPerConn)
	set(&l.MutationBurst, DefaultMutationBurst)
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.MutationsPerSecond == 0 {
		l.MutationsPerSecond = DefaultMutationsPerSecond
	}
	return l
}

// Observer learns about subscriptions, for metrics. Its methods must not
// block.
type Observer interface {
	// SubscriptionStarted records a subscription of a kind (the field
	// name); the returned func records its end.
	SubscriptionStarted(kind string) (ended func())
	// Lagged records events a subscriber missed.
	Lagged(kind string, n uint64)
}

type nopObserver struct{}

func (nopObserver) SubscriptionStarted(string) func() { return func() {} }
func (nopObserver) Lagged(string, uint64)             {}

// Options are the resolvers' collaborators.
type Options struct {
	Engine   Engine   // required, started (its event log exists)
	Registry Registry // the instances; nil when the server manages none
	// Plugins keeps the policy plugins; nil answers their operations with
	// UNAVAILABLE.
	Plugins Plugins
	// Schedules runs the schedules; nil answers their operations with
	// UNAVAILABLE.
	Schedules Schedules
	// Heartbeats runs the heartbeat checks; nil answers their operations
	// with UNAVAILABLE.
	Heartbeats Heartbeats
	// Cluster, on a node of a cluster, tells which node leads; nil for a
	// server on its own.
	Cluster Cluster
	// Pull keeps the leases of pull lanes' workers; nil answers the
	// worker calls with UNAVAILABLE.
	Pull Pull
	// WebhookGuard decides which addresses a webhook URL may name: a task's
	// or a batch's whose host is an address it refuses is refused at
	// submission (webhook.Guard of the deliverer's options). Nil allows
	// public addresses only, as a deliverer does by default.
	WebhookGuard *netguard.Guard
	// Address is where this server's API listens, for the nodes query.
	Address  string
	Version  string
	Limits   Limits
	Observer Observer
	Logger   hclog.Logger
	// SubscriptionBuffer is how many instance or plugin events a
	// subscription may hold for a slow client before it drops some (default
	// 64). Task subscriptions need none: their position in the event log is
	// their buffer, and they hand events over through subgate.
	SubscriptionBuffer int
}

// Resolver is the root resolver.
type Resolver struct {
	eng     Engine
	reg     Registry
	opts    Options
	log     hclog.Logger
	started time.Time
	maxBat  int
	encoded *eventstream.Encoded // the feed's events, encoded once for all subscribers
	hub     *eventstream.Hub     // wakes every subscriber when events arrive
}

// New returns the root resolver.
func New(opts Options) *Resolver {
	opts.Limits = opts.Limits.WithDefaults()
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.SubscriptionBuffer <= 0 {
		opts.SubscriptionBuffer = 64
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.WebhookGuard == nil {
		opts.WebhookGuard = &netguard.Guard{What: "webhook", Settings: "webhooks.allowPrivate or list its network in webhooks.allowNetworks"}
	}
	return &Resolver{eng: opts.Engine, reg: opts.Registry, opts: opts, log: opts.Logger.Named("graphql"),
		started: time.Now(), maxBat: opts.Engine.Config().MaxBatch, encoded: eventstream.NewEncoded(1 << 14),
		hub: eventstream.NewHub(opts.Engine.Events())}
}

// Close stops the resolvers' background work. Subscriptions end with their
// contexts.
func (r *Resolver) Close() { r.hub.Close() }

// Limits returns the limits in force.
func (r *Resolver) Limits() Limits { return r.opts.Limits }

// MaxBatch returns the most items a submitTasks may carry.
func (r *Resolver) MaxBatch() int { return r.maxBat }

// ExecutableSchema returns the schema with these resolvers and the
// complexity of its list fields: a list counts as many times its children
// as the items it may return.
func (r *Resolver) ExecutableSchema() graphql.ExecutableSchema {
	cfg := generated.Config{Resolvers: r}
	c := &cfg.Complexity
	c.Query.Tasks = func(child int, _ *model.TaskFilter, first *int, _ *string, _ *engine.Order) int {
		return 1 + child*pageSize(first, 50)
	}
	c.Query.Plan = func(child int, limit *int, _ *time.Time) int { return 1 + child*pageSize(limit, 20) }
	c.Query.Lanes = func(child int) int { return 1 + child*8 }
	c.Query.Agents = func(child int) int { return 1 + child*50 }
	c.Query.Instances = func(child int) int { return 1 + child*8 }
	c.Query.Policies = func(child int) int { return 1 + child*8 }
	c.Task.Children = func(child int, first *int) int { return 1 + child*pageSize(first, 100) }
	c.Task.Dependencies = func(child int) int { return 1 + child*10 }
	c.Task.Attempts = func(child int) int { return 1 + child*4 }
	c.Batch.Tasks = func(child int, first *int, _ *string) int { return 1 + child*pageSize(first, 100) }
	// submitTasks returns one result per item, at most MaxBatch. The count
	// is charged on the payload's items, not on the mutation: a complexity
	// function with arguments makes gqlgen decode the whole batch twice.
	maxBat := r.maxBat
	c.SubmitTasksPayload.Items = func(child int) int { return 1 + child*maxBat }
	return generated.NewExecutableSchema(cfg)
}

// pageSize is a list argument's value for complexity: its default when
// absent, and no less than 1.
func pageSize(v *int, def int) int {
	if v == nil {
		return def
	}
	return min(max(*v, 1), 1<<20)
}

// Query returns the query resolvers.
func (r *Resolver) Query() generated.QueryResolver { return (*queryResolver)(r) }

// Mutation returns the mutation resolvers.
func (r *Resolver) Mutation() generated.MutationResolver { return (*mutationResolver)(r) }

// Subscription returns the subscription resolvers.
func (r *Resolver) Subscription() generated.SubscriptionResolver { return (*subscriptionResolver)(r) }

// Task returns the Task field resolvers.
func (r *Resolver) Task() generated.TaskResolver { return (*taskResolver)(r) }

// Batch returns the Batch field resolvers.
func (r *Resolver) Batch() generated.BatchResolver { return (*batchResolver)(r) }

// TaskConnection returns the TaskConnection field resolvers.
func (r *Resolver) TaskConnection() generated.TaskConnectionResolver {
	return (*connectionResolver)(r)
}

// TaskEvent returns the TaskEvent field resolvers.
func (r *Resolver) TaskEvent() generated.TaskEventResolver { return (*taskEventResolver)(r) }

type (
	queryResolver        Resolver
	mutationResolver     Resolver
	subscriptionResolver Resolver
	taskResolver         Resolver
	batchResolver        Resolver
	connectionResolver   Resolver
	taskEventResolver    Resolver
)
