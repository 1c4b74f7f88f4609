package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/pull"
)

// Pull lanes on a cluster: the leases live on the leader, with its engine;
// every node serves the worker calls by applying them there. The key lease
// ids are signed with is kept in the store's settings, so a new leader
// verifies the ids of the leases it resumes.
//
// Calls are applied at least once, like every operation: a lease call
// applied twice (its leader died before answering) leases twice, and the
// lease nobody received runs out and counts one failed attempt. A
// completion or failure applied twice answers the second time as the first
// (pull.Manager.Complete: the task's record decides, also on a new leader).

type (
	leaseArgs struct {
		Lane     string
		Max      int
		LeaseFor time.Duration
		Wait     time.Duration
		Worker   string
	}
	leaseIDArgs struct {
		ID       string
		LeaseFor time.Duration
	}
	completeArgs struct {
		ID     string
		Result json.RawMessage
	}
	failArgs struct {
		ID, Msg, Code string
		Retryable     bool
	}
	releaseArgs struct{ ID, Reason string }
)

var errNoPull = &engine.Error{Code: engine.CodeUnavailable, Message: "the leader serves no pull lanes"}

func leaderPull(l *leader) (*pull.Manager, error) {
	if l.pull == nil {
		return nil, errNoPull
	}
	return l.pull, nil
}

var (
	opLease = op[leaseArgs, []pull.Lease]{"pull.lease", func(ctx context.Context, l *leader, a leaseArgs) ([]pull.Lease, error) {
		p, err := leaderPull(l)
		if err != nil {
			return nil, err
		}
		return p.Lease(ctx, a.Lane, a.Max, a.LeaseFor, a.Wait, a.Worker)
	}}
	opLookupLease = op[idArgs, pull.Lease]{"pull.lookup", func(ctx context.Context, l *leader, a idArgs) (pull.Lease, error) {
		p, err := leaderPull(l)
		if err != nil {
			return pull.Lease{}, err
		}
		return p.Lookup(ctx, a.ID)
	}}
	opRenewLease = op[leaseIDArgs, pull.Lease]{"pull.renew", func(ctx context.Context, l *leader, a leaseIDArgs) (pull.Lease, error) {
		p, err := leaderPull(l)
		if err != nil {
			return pull.Lease{}, err
		}
		return p.Renew(ctx, a.ID, a.LeaseFor)
	}}
	opComplete = op[completeArgs, string]{"pull.complete", func(ctx context.Context, l *leader, a completeArgs) (string, error) {
		p, err := leaderPull(l)
		if err != nil {
			return "", err
		}
		return p.Complete(ctx, a.ID, fixRaw(a.Result))
	}}
	opFail = op[failArgs, string]{"pull.fail", func(ctx context.Context, l *leader, a failArgs) (string, error) {
		p, err := leaderPull(l)
		if err != nil {
			return "", err
		}
		return p.Fail(ctx, a.ID, a.Msg, a.Code, a.Retryable)
	}}
	opRelease = op[releaseArgs, string]{"pull.release", func(ctx context.Context, l *leader, a releaseArgs) (string, error) {
		p, err := leaderPull(l)
		if err != nil {
			return "", err
		}
		return p.Release(ctx, a.ID, a.Reason)
	}}
)

// Pull is the pull lanes' worker side as every node of the cluster serves
// it: the leader's.
type Pull struct{ n *Node }

// Pull returns the node's view of the leader's pull lanes.
func (n *Node) Pull() *Pull { return &Pull{n} }

// Lease leases tasks on the leader. A call that waits for work waits there,
// within a deadline that covers the wait.
func (p *Pull) Lease(ctx context.Context, lane string, max int, leaseFor, wait time.Duration, worker string) ([]pull.Lease, error) {
	if _, ok := ctx.Deadline(); !ok && wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+p.n.opts.CallTimeout)
		defer cancel()
	}
	return opLease.call(ctx, p.n, leaseArgs{lane, max, leaseFor, wait, worker})
}

// Lookup returns the live lease named id.
func (p *Pull) Lookup(ctx context.Context, id string) (pull.Lease, error) {
	ctx, cancel := p.n.bound(ctx)
	defer cancel()
	return opLookupLease.call(ctx, p.n, idArgs{id})
}

// Renew extends a lease.
func (p *Pull) Renew(ctx context.Context, id string, leaseFor time.Duration) (pull.Lease, error) {
	return opRenewLease.call(ctx, p.n, leaseIDArgs{id, leaseFor})
}

// Complete ends a lease with the task's result.
func (p *Pull) Complete(ctx context.Context, id string, result json.RawMessage) (string, error) {
	return opComplete.call(ctx, p.n, completeArgs{id, result})
}

// Fail ends a lease with an error and its code ("" for none).
func (p *Pull) Fail(ctx context.Context, id, msg, code string, retryable bool) (string, error) {
	return opFail.call(ctx, p.n, failArgs{id, msg, code, retryable})
}

// Release hands a leased task back.
func (p *Pull) Release(ctx context.Context, id, reason string) (string, error) {
	return opRelease.call(ctx, p.n, releaseArgs{id, reason})
}

// Of returns a task's live lease: the leader's knowledge, so only on the
// leader (elsewhere a task shows no lease rather than a call per task).
func (p *Pull) Of(taskID string) (pull.Lease, bool) {
	if l := p.n.leader(); l != nil && l.pull != nil {
		return l.pull.Of(taskID)
	}
	return pull.Lease{}, false
}
