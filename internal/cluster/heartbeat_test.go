package cluster_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/netguard"
)

// Heartbeat checks on a cluster: the leader runs them, every node manages
// and follows them, and they live in PostgreSQL, so a new leader takes them
// over with their history.
func TestHeartbeatChecksThroughEveryNodeAndAcrossAFailover(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(target.Close)
	withChecks := func(o *cluster.Options) {
		o.Lead = func(ctx context.Context, e *engine.Engine, start func() error) (*cluster.Leadership, error) {
			if err := start(); err != nil {
				return nil, err
			}
			c := heartbeat.New(e, heartbeat.Options{Guard: &netguard.Guard{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
			if err := c.Start(ctx); err != nil {
				return nil, err
			}
			return &cluster.Leadership{Heartbeats: c, Stop: c.Stop}, nil
		}
	}
	f := newFleet(t, 2, 0, withChecks)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	ctx := context.Background()

	events, stop := follower.Heartbeats().Subscribe(16)
	defer stop()
	check, err := follower.Heartbeats().Create(ctx, heartbeat.Spec{Name: "shop", URL: target.URL, Interval: time.Hour})
	require.NoError(t, err)
	got, err := follower.Heartbeats().Probe(ctx, check.ID)
	require.NoError(t, err)
	require.Equal(t, heartbeat.StateUp, got.State)
	healthy.Store(false)
	got, err = follower.Heartbeats().Probe(ctx, check.ID)
	require.NoError(t, err)
	require.Equal(t, heartbeat.StateDown, got.State)
	select {
	case ev := <-events:
		require.Equal(t, check.ID, ev.CheckID)
		require.Equal(t, [2]heartbeat.State{heartbeat.StateUp, heartbeat.StateDown}, [2]heartbeat.State{ev.From, ev.To})
	case <-time.After(20 * time.Second):
		t.Fatal("the follower's subscriber never heard of the change")
	}
	list := lead.Heartbeats().List(context.Background())
	require.Len(t, list, 1)
	require.Len(t, list[0].History, 2)

	// The leader goes; the other node leads and has the check, its state and
	// its history, from the store.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lead.Stop(sctx)
	next := f.leader([]*testNode{follower})
	back, err := next.Heartbeats().Get(context.Background(), check.ID)
	require.NoError(t, err)
	require.Equal(t, heartbeat.StateDown, back.State)
	require.Len(t, back.History, 2)
	healthy.Store(true)
	back, err = next.Heartbeats().Probe(ctx, check.ID)
	require.NoError(t, err)
	require.Equal(t, heartbeat.StateUp, back.State)
}
