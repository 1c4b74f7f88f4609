package storetest

// Batches, lanes and settings.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

func testBatches(t *testing.T, d Driver) {
	s := d.open(t)
	b1 := engine.BatchInfo{ID: "B1", Parallelism: 3, WebhookURL: "https://example.test/b1", CreatedAt: epoch}
	b2 := engine.BatchInfo{ID: "B2-ü", CreatedAt: epoch.Add(time.Second)}
	commit(t, s, &engine.Batch{Batches: []engine.BatchInfo{b1, b2}})
	for _, want := range []engine.BatchInfo{b1, b2} {
		got, err := s.Batch(bg, want.ID)
		require.NoError(t, err)
		got.CreatedAt = nt(got.CreatedAt)
		require.Equal(t, want, *got)
	}
	_, err := s.Batch(bg, "B3")
	requireNotFound(t, err, "an unknown batch")

	// A batch is replaced by ID: its end and its webhook deliveries.
	ended := b1
	ended.EndedAt = epoch.Add(time.Minute)
	ended.Webhooks = []engine.WebhookDelivery{{ID: "B1.9", Attempt: 1, URL: b1.WebhookURL, At: epoch.Add(time.Minute),
		Duration: 3 * time.Millisecond, HTTPStatus: 200, Delivered: true, Final: true}}
	commit(t, s, &engine.Batch{Batches: []engine.BatchInfo{ended}})
	got, err := d.reopen(t, s).Batch(bg, "B1")
	require.NoError(t, err)
	got.CreatedAt, got.EndedAt = nt(got.CreatedAt), nt(got.EndedAt)
	for i := range got.Webhooks {
		got.Webhooks[i].At = nt(got.Webhooks[i].At)
	}
	require.Equal(t, ended, *got, "a batch's end and deliveries survive a restart")
}

func testLanesSettings(t *testing.T, d Driver) {
	s := d.open(t)
	main := engine.DefaultLanes()[0]
	team := engine.DefaultLanes()[2]
	commit(t, s, &engine.Batch{Lanes: []engine.LaneConfig{main, team},
		Settings: []engine.Setting{{Key: "policy.fairness", Value: []byte(`{"name":"fairshare"}`)}, {Key: "plugins", Value: []byte{0, 1, 2, 255}}}})
	paused := main
	paused.Paused, paused.MaxInFlight = true, 5
	paused.Retry.MaxAttempts = 9
	commit(t, s, &engine.Batch{Lanes: []engine.LaneConfig{paused},
		Settings: []engine.Setting{{Key: "policy.fairness", Value: []byte(`{"name":"drr"}`)}, {Key: "plugins", Value: nil}, {Key: "ü", Value: []byte{}}}})
	snap := load(t, s)
	lanes := slices.Clone(snap.Lanes)
	slices.SortFunc(lanes, func(a, b engine.LaneConfig) int { return strings.Compare(a.Name, b.Name) })
	require.Equal(t, []engine.LaneConfig{paused, team}, lanes, "the latest config of each lane")
	require.Equal(t, map[string][]byte{"policy.fairness": []byte(`{"name":"drr"}`), "ü": {}}, snap.Settings,
		"the latest value of each setting; nil deletes; empty is a value")
	s2 := d.reopen(t, s)
	snap2 := load(t, s2)
	require.ElementsMatch(t, snap.Lanes, snap2.Lanes, "lanes survive a restart")
	require.Equal(t, snap.Settings, snap2.Settings, "settings survive a restart")
}
