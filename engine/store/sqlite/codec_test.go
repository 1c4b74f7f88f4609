package sqlite

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

// encodeStatus is the reference for appendStatus: the same document through
// encoding/json.
func encodeStatus(t *engine.Task, scratch []attemptJSON) ([]byte, []attemptJSON, error) { //nolint:unparam // mirrors the old signature
	j := statusJSON{
		Depth: t.Depth, Rank: t.Rank, Reason: t.Reason, Error: t.Error, Class: t.Class, RetryOf: t.RetryOf,
		CreatedAt: unixNano(t.CreatedAt), UpdatedAt: unixNano(t.UpdatedAt), QueuedAt: unixNano(t.QueuedAt),
		NextRunAt: unixNano(t.NextRunAt), EndedAt: unixNano(t.EndedAt), LastSeq: t.LastSeq, Unmet: t.Unmet,
		ResetAt: t.ResetAt, Webhooks: t.Webhooks,
	}
	if len(t.Attempts) > 0 {
		scratch = scratch[:0]
		for i := range t.Attempts {
			a := &t.Attempts[i]
			scratch = append(scratch, attemptJSON{N: a.N, LeaseID: a.LeaseID, InstanceID: a.InstanceID, TabID: a.TabID,
				AssignedAt: unixNano(a.AssignedAt), StartedAt: unixNano(a.StartedAt), EndedAt: unixNano(a.EndedAt),
				Class: a.Class, HTTPStatus: a.HTTPStatus, Error: a.Error,
				TabTime: int64(a.TabTime), ActionTime: int64(a.ActionTime), Fault: a.InstanceFault})
		}
		j.Attempts = scratch
	}
	b, err := json.Marshal(&j)
	return b, scratch, err
}

func TestAppendStatusMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 1, time.UTC)
	odd := "quote \" back\\slash \x00 nul \x1f ctl \n\r\t <html> & \u2028 ünï 🤖 bad\xff\xfeutf8"
	for i, task := range []*engine.Task{
		{},
		{Position: -1, Reason: "submitted", CreatedAt: at},
		{Depth: 3, Rank: -9, Reason: odd, Error: odd, Class: policy.ClassPermanent, RetryOf: "T1", CreatedAt: at, UpdatedAt: at,
			QueuedAt: at, NextRunAt: at, EndedAt: at, LastSeq: 1 << 40, Unmet: 2, ResetAt: 1, Position: 7,
			Attempts: []engine.Attempt{{N: 1}, {N: 2, LeaseID: 1 << 50, InstanceID: odd, TabID: "t", AssignedAt: at, StartedAt: at,
				EndedAt: at, Class: policy.ClassTransient, HTTPStatus: 502, Error: strings.Repeat(odd, 3),
				TabTime: 3 * time.Millisecond, ActionTime: time.Second + 7, InstanceFault: true}},
			Webhooks: []engine.WebhookDelivery{{ID: "d", Attempt: 2, URL: odd, At: at, Duration: time.Second, HTTPStatus: 500, Error: odd, Final: true}}},
	} {
		want, _, err := encodeStatus(task, nil)
		require.NoError(t, err)
		got := appendStatus(nil, task)
		require.True(t, json.Valid(got), "case %d: %s", i, got)
		var w, g statusJSON
		require.NoError(t, json.Unmarshal(want, &w))
		require.NoError(t, json.Unmarshal(got, &g))
		require.Equal(t, w, g, "case %d", i)
	}
}
