package postgres

// How engine records become column values and back. Specs and statuses are
// JSON documents in bytea columns; times in them are unix nanoseconds (0 for
// the zero time) and read back in UTC. Params and results are not part of
// the JSON: they are stored verbatim, so that a store returns exactly the
// bytes it was given. Labels become one bytea element each, so that a GIN
// index answers "has every one of these labels" (@>).
//
// The SQLite store has a codec of the same spirit. They stay apart on
// purpose: each is the on-disk format of its own databases, versioned with
// that store's migrations, and one must be able to change without a
// migration of the other.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// bytesOrNil returns s as bytes, or nil (SQL NULL) when it is empty.
func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

type actionDoc struct {
	Kind     string `json:"kind"`
	Ref      string `json:"ref,omitempty"`
	Selector string `json:"selector,omitempty"`
}

type retryDoc struct {
	MaxAttempts int     `json:"maxAttempts"`
	Backoff     int64   `json:"backoffNs,omitempty"`
	Multiplier  float64 `json:"multiplier,omitempty"`
	MaxBackoff  int64   `json:"maxBackoffNs,omitempty"`
	Jitter      bool    `json:"jitter,omitempty"`
}

// specDoc is the stored form of an engine.TaskSpec, without its params.
type specDoc struct {
	AgentID        string            `json:"agentId"`
	Lane           string            `json:"lane,omitempty"`
	SessionKey     string            `json:"sessionKey,omitempty"`
	Priority       engine.Priority   `json:"priority"`
	Action         *actionDoc        `json:"action,omitempty"`
	Instruction    string            `json:"instruction,omitempty"`
	TabID          string            `json:"tabId,omitempty"`
	InstanceID     string            `json:"instanceId,omitempty"`
	DependsOn      []string          `json:"dependsOn,omitempty"`
	BatchID        string            `json:"batchId,omitempty"`
	ParentID       string            `json:"parentId,omitempty"`
	Deadline       int64             `json:"deadlineNs,omitempty"`
	Timeout        int64             `json:"timeoutNs,omitempty"`
	Retry          *retryDoc         `json:"retry,omitempty"`
	WebhookURL     string            `json:"webhookUrl,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	QueueMode      engine.QueueMode  `json:"queueMode,omitempty"`
	Exhausted      engine.Exhausted  `json:"exhausted,omitempty"`
	SessionMax     int               `json:"sessionMaxInFlight,omitempty"`
	SubmittedAt    int64             `json:"submittedAtNs,omitempty"`
}

// encodeSpec returns the JSON of a spec and its params (kept apart).
func encodeSpec(s *engine.TaskSpec) (doc, params []byte, err error) {
	d := specDoc{
		AgentID: s.AgentID, Lane: s.Lane, SessionKey: s.SessionKey, Priority: s.Priority,
		Instruction: s.Instruction, TabID: s.TabID, InstanceID: s.InstanceID, DependsOn: s.DependsOn,
		BatchID: s.BatchID, ParentID: s.ParentID, Deadline: unixNano(s.Deadline), Timeout: int64(s.Timeout),
		WebhookURL: s.WebhookURL, IdempotencyKey: s.IdempotencyKey, Labels: s.Labels, QueueMode: s.QueueMode, Exhausted: s.Exhausted, SessionMax: s.SessionMaxInFlight,
		SubmittedAt: unixNano(s.SubmittedAt),
	}
	if a := s.Action; a != nil {
		d.Action = &actionDoc{Kind: a.Kind, Ref: a.Ref, Selector: a.Selector}
		params = a.Params
	}
	if r := s.Retry; r != nil {
		d.Retry = &retryDoc{MaxAttempts: r.MaxAttempts, Backoff: int64(r.Backoff), Multiplier: r.Multiplier,
			MaxBackoff: int64(r.MaxBackoff), Jitter: r.Jitter}
	}
	doc, err = json.Marshal(&d)
	return doc, params, err
}

func decodeSpec(doc, params []byte) (*engine.TaskSpec, error) {
	var d specDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	s := &engine.TaskSpec{
		AgentID: d.AgentID, Lane: d.Lane, SessionKey: d.SessionKey, Priority: d.Priority,
		Instruction: d.Instruction, TabID: d.TabID, InstanceID: d.InstanceID, DependsOn: d.DependsOn,
		BatchID: d.BatchID, ParentID: d.ParentID, Deadline: fromUnixNano(d.Deadline), Timeout: time.Duration(d.Timeout),
		WebhookURL: d.WebhookURL, IdempotencyKey: d.IdempotencyKey, Labels: d.Labels, QueueMode: d.QueueMode, Exhausted: d.Exhausted, SessionMaxInFlight: d.SessionMax,
		SubmittedAt: fromUnixNano(d.SubmittedAt),
	}
	if a := d.Action; a != nil {
		s.Action = &engine.Action{Kind: a.Kind, Ref: a.Ref, Selector: a.Selector}
		if params != nil {
			s.Action.Params = json.RawMessage(params)
		}
	}
	if r := d.Retry; r != nil {
		s.Retry = &engine.RetryPolicy{MaxAttempts: r.MaxAttempts, Backoff: time.Duration(r.Backoff), Multiplier: r.Multiplier,
			MaxBackoff: time.Duration(r.MaxBackoff), Jitter: r.Jitter}
	}
	return s, nil
}

type attemptDoc struct {
	N          int               `json:"n"`
	LeaseID    uint64            `json:"leaseId,omitempty"`
	InstanceID string            `json:"instanceId,omitempty"`
	TabID      string            `json:"tabId,omitempty"`
	AssignedAt int64             `json:"assignedAtNs,omitempty"`
	StartedAt  int64             `json:"startedAtNs,omitempty"`
	EndedAt    int64             `json:"endedAtNs,omitempty"`
	Class      policy.ErrorClass `json:"class,omitempty"`
	HTTPStatus int               `json:"httpStatus,omitempty"`
	Error      string            `json:"error,omitempty"`
	TabTime    int64             `json:"tabTimeNs,omitempty"`
	ActionTime int64             `json:"actionTimeNs,omitempty"`
	Fault      bool              `json:"instanceFault,omitempty"`
}

// statusDoc is what changes over a task's life, apart from its state (a
// column) and its result (a column).
type statusDoc struct {
	Depth     int                      `json:"depth,omitempty"`
	Rank      int64                    `json:"rank,omitempty"`
	Reason    string                   `json:"reason,omitempty"`
	Attempts  []attemptDoc             `json:"attempts,omitempty"`
	Error     string                   `json:"error,omitempty"`
	Class     policy.ErrorClass        `json:"class,omitempty"`
	RetryOf   string                   `json:"retryOf,omitempty"`
	CreatedAt int64                    `json:"createdAtNs,omitempty"`
	UpdatedAt int64                    `json:"updatedAtNs,omitempty"`
	QueuedAt  int64                    `json:"queuedAtNs,omitempty"`
	NextRunAt int64                    `json:"nextRunAtNs,omitempty"`
	EndedAt   int64                    `json:"endedAtNs,omitempty"`
	LastSeq   uint64                   `json:"lastSeq,omitempty"`
	Unmet     int                      `json:"unmet,omitempty"`
	ResetAt   int                      `json:"resetAt,omitempty"`
	Webhooks  []engine.WebhookDelivery `json:"webhooks,omitempty"`
}

// encodeStatus returns the JSON of t's status. scratch is reused for the
// attempts.
func encodeStatus(t *engine.Task, scratch *statusDoc) ([]byte, error) {
	d := scratch
	atts := d.Attempts[:0]
	*d = statusDoc{Depth: t.Depth, Rank: t.Rank, Reason: t.Reason, Error: t.Error, Class: t.Class, RetryOf: t.RetryOf,
		CreatedAt: unixNano(t.CreatedAt), UpdatedAt: unixNano(t.UpdatedAt), QueuedAt: unixNano(t.QueuedAt),
		NextRunAt: unixNano(t.NextRunAt), EndedAt: unixNano(t.EndedAt), LastSeq: t.LastSeq, Unmet: t.Unmet,
		ResetAt: t.ResetAt, Webhooks: t.Webhooks}
	for i := range t.Attempts {
		a := &t.Attempts[i]
		atts = append(atts, attemptDoc{N: a.N, LeaseID: a.LeaseID, InstanceID: a.InstanceID, TabID: a.TabID,
			AssignedAt: unixNano(a.AssignedAt), StartedAt: unixNano(a.StartedAt), EndedAt: unixNano(a.EndedAt),
			Class: a.Class, HTTPStatus: a.HTTPStatus, Error: a.Error,
			TabTime: int64(a.TabTime), ActionTime: int64(a.ActionTime), Fault: a.InstanceFault})
	}
	d.Attempts = atts
	return json.Marshal(d)
}

func decodeStatus(data []byte, t *engine.Task) error {
	var d statusDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("decode status: %w", err)
	}
	t.Depth, t.Rank, t.Reason, t.Error, t.Class, t.RetryOf = d.Depth, d.Rank, d.Reason, d.Error, d.Class, d.RetryOf
	t.CreatedAt, t.UpdatedAt, t.QueuedAt = fromUnixNano(d.CreatedAt), fromUnixNano(d.UpdatedAt), fromUnixNano(d.QueuedAt)
	t.NextRunAt, t.EndedAt = fromUnixNano(d.NextRunAt), fromUnixNano(d.EndedAt)
	t.LastSeq, t.Unmet, t.ResetAt, t.Position = d.LastSeq, d.Unmet, d.ResetAt, -1 // a position is computed, not stored
	t.Webhooks = d.Webhooks
	if len(d.Attempts) > 0 {
		t.Attempts = make([]engine.Attempt, len(d.Attempts))
		for i, a := range d.Attempts {
			t.Attempts[i] = engine.Attempt{N: a.N, LeaseID: a.LeaseID, InstanceID: a.InstanceID, TabID: a.TabID,
				AssignedAt: fromUnixNano(a.AssignedAt), StartedAt: fromUnixNano(a.StartedAt), EndedAt: fromUnixNano(a.EndedAt),
				Class: a.Class, HTTPStatus: a.HTTPStatus, Error: a.Error,
				TabTime: time.Duration(a.TabTime), ActionTime: time.Duration(a.ActionTime), InstanceFault: a.Fault}
		}
	}
	return nil
}

// labelElems returns one element per label, uvarint(len(key)) key value, or
// nil (SQL NULL) when there is none: "has these labels" is then the array
// containment @>, which a GIN index answers.
func labelElems(labels map[string]string) [][]byte {
	if len(labels) == 0 {
		return nil
	}
	out := make([][]byte, 0, len(labels))
	for k, v := range labels {
		e := make([]byte, 0, binary.MaxVarintLen64+len(k)+len(v))
		e = binary.AppendUvarint(e, uint64(len(k)))
		e = append(e, k...)
		out = append(out, append(e, v...))
	}
	return out
}

// labelsLiteral returns labelElems as a bytea[] literal ('{"\\x…",…}'), or
// "" for none: arrays of arrays of different lengths cannot be passed as one
// parameter, so each task's labels travel as a literal the SQL casts.
func labelsLiteral(labels map[string]string) string {
	elems := labelElems(labels)
	if elems == nil {
		return ""
	}
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 0, 64*len(elems))
	b = append(b, '{')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"\\x`...)
		for _, c := range e {
			b = append(b, hexdigits[c>>4], hexdigits[c&15])
		}
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// seqsLiteral returns seqs as a bigint[] literal ("{1,2,3}"), or "" for none.
func seqsLiteral(dst []byte, seqs []uint64) []byte {
	if len(seqs) == 0 {
		return dst
	}
	dst = append(dst, '{')
	for i, s := range seqs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, s, 10)
	}
	return append(dst, '}')
}

// Lanes are stored as the JSON of engine.LaneConfig (durations in ns).
func encodeLane(l *engine.LaneConfig) ([]byte, error) { return json.Marshal(l) }

func decodeLane(data []byte) (engine.LaneConfig, error) {
	var l engine.LaneConfig
	if err := json.Unmarshal(data, &l); err != nil {
		return l, fmt.Errorf("decode lane: %w", err)
	}
	return l, nil
}
