package sqlcodec

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

const odd = "quote \" back\\slash \x00 nul \x1f ctl \n\r\t <html> & \u2028 ünï 🤖 bad\xff\xfeutf8"

// refSpec is the reference for AppendSpec: the same document through
// encoding/json.
func refSpec(s *engine.TaskSpec) ([]byte, error) {
	d := specDoc{
		AgentID: s.AgentID, Lane: s.Lane, SessionKey: s.SessionKey, Priority: s.Priority,
		Instruction: s.Instruction, TabID: s.TabID, InstanceID: s.InstanceID, DependsOn: s.DependsOn,
		BatchID: s.BatchID, ParentID: s.ParentID, Deadline: UnixNano(s.Deadline), Timeout: int64(s.Timeout),
		WebhookURL: s.WebhookURL, IdempotencyKey: s.IdempotencyKey, Labels: s.Labels, QueueMode: s.QueueMode,
		Exhausted: s.Exhausted, SessionMax: s.SessionMaxInFlight, SubmittedAt: UnixNano(s.SubmittedAt),
	}
	if a := s.Action; a != nil {
		d.Action = &actionDoc{Kind: a.Kind, Ref: a.Ref, Selector: a.Selector}
	}
	if r := s.Retry; r != nil {
		d.Retry = &retryDoc{MaxAttempts: r.MaxAttempts, Backoff: int64(r.Backoff), Multiplier: r.Multiplier,
			MaxBackoff: int64(r.MaxBackoff), Jitter: r.Jitter}
	}
	return json.Marshal(&d)
}

func TestAppendSpecMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 1, time.UTC)
	for i, s := range []*engine.TaskSpec{
		{},
		{AgentID: "a", Action: &engine.Action{Kind: "click"}},
		{AgentID: odd, Lane: odd, SessionKey: odd, Priority: -3, Action: &engine.Action{Kind: odd, Ref: odd, Selector: odd,
			Params: json.RawMessage(`{"x":1}`)},
			Instruction: odd, TabID: odd, InstanceID: odd, DependsOn: []string{"T1", odd}, BatchID: odd, ParentID: odd,
			Deadline: at, Timeout: time.Minute, Retry: &engine.RetryPolicy{MaxAttempts: 5, Backoff: time.Second, Multiplier: 1.5,
				MaxBackoff: time.Hour, Jitter: true},
			WebhookURL: odd, IdempotencyKey: odd, Labels: map[string]string{"z": odd, odd: "1", "a": ""}, QueueMode: 2,
			Exhausted: "fail", SessionMaxInFlight: 7, SubmittedAt: at},
		{AgentID: "a", Priority: 9, Retry: &engine.RetryPolicy{Multiplier: 1e300}},
		{AgentID: "a", Retry: &engine.RetryPolicy{MaxAttempts: 1, Multiplier: 3e-7}},
	} {
		want, err := refSpec(s)
		require.NoError(t, err)
		got, err := AppendSpec([]byte("keep"), s)
		require.NoError(t, err)
		require.Equal(t, "keep", string(got[:4]))
		got = got[4:]
		require.True(t, json.Valid(got), "case %d: %s", i, got)
		var w, g specDoc
		require.NoError(t, json.Unmarshal(want, &w))
		require.NoError(t, json.Unmarshal(got, &g))
		require.Equal(t, w, g, "case %d", i)

		back, err := DecodeSpec(got, []byte(`{"x":1}`))
		require.NoError(t, err)
		require.Equal(t, s.AgentID == odd, strings.Contains(back.AgentID, "\ufffd"), "case %d", i)
	}
	_, err := AppendSpec(nil, &engine.TaskSpec{Retry: &engine.RetryPolicy{Multiplier: math.NaN()}})
	require.Error(t, err)
}

// refStatus is the reference for AppendStatus: the same document through
// encoding/json.
func refStatus(t *engine.Task) ([]byte, error) {
	d := statusDoc{
		Depth: t.Depth, Rank: t.Rank, Reason: t.Reason, Error: t.Error, Class: t.Class, RetryOf: t.RetryOf,
		CreatedAt: UnixNano(t.CreatedAt), UpdatedAt: UnixNano(t.UpdatedAt), QueuedAt: UnixNano(t.QueuedAt),
		NextRunAt: UnixNano(t.NextRunAt), EndedAt: UnixNano(t.EndedAt), LastSeq: t.LastSeq, Unmet: t.Unmet,
		ResetAt: t.ResetAt, Webhooks: t.Webhooks,
	}
	for i := range t.Attempts {
		a := &t.Attempts[i]
		d.Attempts = append(d.Attempts, attemptDoc{N: a.N, LeaseID: a.LeaseID, InstanceID: a.InstanceID, TabID: a.TabID,
			AssignedAt: UnixNano(a.AssignedAt), StartedAt: UnixNano(a.StartedAt), EndedAt: UnixNano(a.EndedAt),
			Class: a.Class, HTTPStatus: a.HTTPStatus, Error: a.Error, Code: a.Code,
			TabTime: int64(a.TabTime), ActionTime: int64(a.ActionTime), Fault: a.InstanceFault, EndedBy: a.EndedBy.String()})
	}
	return json.Marshal(&d)
}

func TestAppendStatusMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 2, 9, 0, 0, 1, time.UTC)
	for i, task := range []*engine.Task{
		{},
		{Position: -1, Reason: "submitted", CreatedAt: at},
		{Depth: 3, Rank: -9, Reason: odd, Error: odd, Class: policy.ClassPermanent, RetryOf: "T1", CreatedAt: at, UpdatedAt: at,
			QueuedAt: at, NextRunAt: at, EndedAt: at, LastSeq: 1 << 40, Unmet: 2, ResetAt: 1, Position: 7,
			Attempts: []engine.Attempt{{N: 1}, {N: 2, LeaseID: 1 << 50, InstanceID: odd, TabID: "t", AssignedAt: at, StartedAt: at,
				EndedAt: at, Class: policy.ClassTransient, HTTPStatus: 502, Error: strings.Repeat(odd, 3), Code: "upstream_503",
				TabTime: 3 * time.Millisecond, ActionTime: time.Second + 7, InstanceFault: true, EndedBy: engine.EndedByWorker}},
			Webhooks: []engine.WebhookDelivery{{ID: "d", Attempt: 2, URL: odd, At: at, Duration: time.Second, HTTPStatus: 500, Error: odd, Final: true}}},
	} {
		want, err := refStatus(task)
		require.NoError(t, err)
		got := AppendStatus(nil, task)
		require.True(t, json.Valid(got), "case %d: %s", i, got)
		var w, g statusDoc
		require.NoError(t, json.Unmarshal(want, &w))
		require.NoError(t, json.Unmarshal(got, &g))
		require.Equal(t, w, g, "case %d", i)
	}
}

// Who ended each attempt survives the status document; a document written
// before it was kept, or naming an ender this build does not know, reads
// as not known.
func TestStatusKeepsWhoEndedEachAttempt(t *testing.T) {
	t.Parallel()
	task := &engine.Task{Attempts: []engine.Attempt{{N: 1, EndedBy: engine.EndedByWorker}, {N: 2, EndedBy: engine.EndedByExecutor},
		{N: 3, EndedBy: engine.EndedByEngine}, {N: 4}}}
	var got engine.Task
	require.NoError(t, DecodeStatus(AppendStatus(nil, task), &got))
	require.Equal(t, []engine.Ender{engine.EndedByWorker, engine.EndedByExecutor, engine.EndedByEngine, engine.EndedByUnknown},
		[]engine.Ender{got.Attempts[0].EndedBy, got.Attempts[1].EndedBy, got.Attempts[2].EndedBy, got.Attempts[3].EndedBy})
	require.NoError(t, DecodeStatus([]byte(`{"attempts":[{"n":1,"code":"timeout"},{"n":2,"endedBy":"operator"}]}`), &got))
	require.Equal(t, engine.EndedByUnknown, got.Attempts[0].EndedBy)
	require.Equal(t, engine.EndedByUnknown, got.Attempts[1].EndedBy)
}

func BenchmarkAppendSpec(b *testing.B) {
	s := &engine.TaskSpec{AgentID: "agent-1", Lane: "main", Action: &engine.Action{Kind: "click", Selector: "#go"},
		BatchID: "B123", SubmittedAt: time.Now()}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendSpec(buf[:0], s)
	}
}
