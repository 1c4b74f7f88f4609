package executor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestHealthChecksMarkUnhealthyAfterNFailuresAndRecover(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour, UnhealthyAfter: 3})
	t.Cleanup(reg.Close)
	sink := newFakeSink()
	reg.SetSink(sink)
	events, cancel := reg.Subscribe(32)
	defer cancel()

	a.set(func(f *fakeInstance) { f.down = true })
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: a.URL(), Capacity: 4})
	require.NoError(t, err)
	info, ok := sink.info("a")
	require.True(t, ok)
	require.False(t, info.Healthy, "no work before the first check passes")
	require.Equal(t, 4, info.Capacity)
	// The registry checks a new instance at once.
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "a"); inst.Health != executor.HealthUnhealthy {
			return errors.New("first check not done")
		}
		return nil
	})
	a.set(func(f *fakeInstance) { f.down = false })

	check := func() executor.Instance {
		inst, err := reg.CheckNow(context.Background(), "a")
		require.NoError(t, err)
		return inst
	}
	inst := check()
	require.Equal(t, executor.HealthHealthy, inst.Health)
	require.Positive(t, inst.Latency, "latency is tracked")
	require.False(t, inst.LastCheck.IsZero())
	info, _ = sink.info("a")
	require.True(t, info.Healthy)

	a.set(func(f *fakeInstance) { f.down = true })
	require.Equal(t, executor.HealthHealthy, check().Health, "one failure is not enough")
	inst = check()
	require.Equal(t, executor.HealthHealthy, inst.Health, "two failures are not enough")
	require.Equal(t, 2, inst.Failures)
	require.Contains(t, inst.LastError, "EOF")
	inst = check()
	require.Equal(t, executor.HealthUnhealthy, inst.Health, "the third failure is")
	info, _ = sink.info("a")
	require.False(t, info.Healthy, "routed around")

	a.set(func(f *fakeInstance) { f.down = false })
	inst = check()
	require.Equal(t, executor.HealthHealthy, inst.Health, "recovered automatically")
	require.Zero(t, inst.Failures)
	require.Empty(t, inst.LastError)
	info, _ = sink.info("a")
	require.True(t, info.Healthy)

	var types []executor.EventType
	var last uint64
	for len(types) < 5 {
		select {
		case ev := <-events:
			require.Greater(t, ev.Seq, last, "sequence numbers increase")
			last = ev.Seq
			types = append(types, ev.Type)
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far: %v", types)
		}
	}
	require.Equal(t, []executor.EventType{executor.EventRegistered, executor.EventUnhealthy, executor.EventHealthy, executor.EventUnhealthy, executor.EventHealthy}, types)
}

func TestHealthLoopRunsOnItsInterval(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: 20 * time.Millisecond, UnhealthyAfter: 2})
	t.Cleanup(reg.Close)
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: a.URL()})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "a"); inst.Health != executor.HealthHealthy {
			return errors.New("not healthy yet")
		}
		return nil
	})
	a.set(func(f *fakeInstance) { f.down = true })
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "a"); inst.Health != executor.HealthUnhealthy {
			return errors.New("not unhealthy yet")
		}
		return nil
	})
}

func TestRegisterUpdateRemove(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	b := newFakeInstance(t, "b", "")
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	sink := newFakeSink()
	reg.SetSink(sink)

	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: a.URL(), Capacity: 2, Labels: map[string]string{"zone": "eu"}})
	require.NoError(t, err)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: b.URL()})
	require.ErrorIs(t, err, executor.ErrDuplicateInstance)

	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "bad id!", URL: "not a url", Kind: "robot", Capacity: -1})
	require.ErrorContains(t, err, "id:")
	require.ErrorContains(t, err, "url:")
	require.ErrorContains(t, err, "kind:")
	require.ErrorContains(t, err, "capacity:")

	capacity := 8
	inst, err := reg.Update(context.Background(), "a", executor.InstanceUpdate{Capacity: &capacity})
	require.NoError(t, err)
	require.Equal(t, 8, inst.Capacity)
	require.Equal(t, map[string]string{"zone": "eu"}, inst.Labels)
	info, _ := sink.info("a")
	require.Equal(t, 8, info.Capacity)

	newURL := b.URL()
	inst, err = reg.Update(context.Background(), "a", executor.InstanceUpdate{URL: &newURL})
	require.NoError(t, err)
	require.Equal(t, executor.HealthUnknown, inst.Health, "a new address is checked afresh")
	_, err = reg.CheckNow(context.Background(), "a")
	require.NoError(t, err)
	require.NotEmpty(t, b.requests(), "checks go to the new address")

	_, err = reg.Update(context.Background(), "zzz", executor.InstanceUpdate{})
	require.ErrorIs(t, err, executor.ErrUnknownInstance)

	require.Len(t, reg.List(context.Background()), 1)
	require.NoError(t, reg.Remove(context.Background(), "a"))
	require.ErrorIs(t, reg.Remove(context.Background(), "a"), executor.ErrUnknownInstance)
	require.Empty(t, reg.List(context.Background()))
	_, ok := sink.info("a")
	require.False(t, ok)
}

func TestSetSinkReplaysTheFleet(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: a.URL(), Capacity: 3})
	require.NoError(t, err)
	_, err = reg.CheckNow(context.Background(), "a")
	require.NoError(t, err)
	sink := newFakeSink()
	reg.SetSink(sink)
	info, ok := sink.info("a")
	require.True(t, ok)
	require.True(t, info.Healthy)
	require.Equal(t, 3, info.Capacity)
}

func TestSlowSubscriberNeverBlocksAndLearnsWhatItMissed(t *testing.T) {
	t.Parallel()
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	events, cancel := reg.Subscribe(2)
	defer cancel()
	a := newFakeInstance(t, "a", "")
	for i := 0; i < 5; i++ {
		c := i + 1
		if i == 0 {
			_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: a.URL()})
			require.NoError(t, err)
			continue
		}
		_, err := reg.Update(context.Background(), "a", executor.InstanceUpdate{Capacity: &c}) // never blocks
		require.NoError(t, err)
	}
	// Drain what fits, then one more event carries the count of the lost.
	got := []executor.InstanceEvent{<-events, <-events}
	require.Equal(t, executor.EventRegistered, got[0].Type)
	require.NoError(t, reg.Remove(context.Background(), "a"))
	var ev executor.InstanceEvent
	waitfor.CheckFor(t, func() error {
		select {
		case ev = <-events:
			return nil
		default:
			return errors.New("no event")
		}
	})
	require.Equal(t, executor.EventRemoved, ev.Type)
	require.Positive(t, ev.Lagged, "the subscriber is told it missed events")
}

func TestAKeptInstanceIsNotRemoved(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	sink := newFakeSink()
	reg.SetSink(sink)
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "a", URL: a.URL(), Capacity: 4})
	require.NoError(t, err)
	reg.KeepRegistered("a", "set x to turn it off")
	err = reg.Remove(context.Background(), "a")
	require.ErrorIs(t, err, executor.ErrNotRemovable)
	require.ErrorContains(t, err, "set x to turn it off")
	in, ok := reg.Get(context.Background(), "a")
	require.True(t, ok, "still registered")
	require.Equal(t, 4, in.Capacity)
	_, ok = sink.info("a")
	require.True(t, ok, "the engine still places work on it")
}
