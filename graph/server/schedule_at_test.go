package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An at schedule whose time is not in the future would never run: it is
// refused, and so is an update that sets such a time.
func TestAnAtScheduleInThePastIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.schedules = true })
	ctx := ctxFor(t)
	tmpl := map[string]any{"agentId": "e", "action": map[string]any{"kind": "click", "selector": "#go"}}
	createQ := `mutation($in: ScheduleInput!) { createSchedule(input: $in) { id nextRunAt } }`
	e := gqlErr(t, b.c.Do(ctx, createQ, map[string]any{"in": map[string]any{"name": "p", "kind": "AT", "at": "2000-01-01T00:00:00Z", "template": tmpl}}, nil))
	require.Equal(t, "INVALID_INPUT", e.Code(), e.Message)
	require.Equal(t, "input.at", e.Field(), e.Message)
	require.Contains(t, e.Message, "is not in the future")
	require.Empty(t, b.sched.List(context.Background()))

	var out struct {
		CreateSchedule struct{ ID, NextRunAt string }
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	require.NoError(t, b.c.Do(ctx, createQ, map[string]any{"in": map[string]any{"name": "f", "kind": "AT", "at": future, "template": tmpl}}, &out))
	require.NotEmpty(t, out.CreateSchedule.NextRunAt)
	e = gqlErr(t, b.c.Do(ctx, `mutation($id: ID!, $in: ScheduleInput!) { updateSchedule(id: $id, input: $in) { id } }`,
		map[string]any{"id": out.CreateSchedule.ID, "in": map[string]any{"name": "f", "kind": "AT", "at": "2000-01-01T00:00:00Z", "template": tmpl}}, nil))
	require.Equal(t, "INVALID_INPUT", e.Code(), e.Message)
	require.Equal(t, "input.at", e.Field(), e.Message)
	sc, err := b.sched.Get(context.Background(), out.CreateSchedule.ID)
	require.NoError(t, err)
	require.True(t, sc.Spec.At.After(time.Now()), "the refused update changed nothing")
}
