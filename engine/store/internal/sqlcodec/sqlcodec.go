// Package sqlcodec is the stored form of task specs, task statuses and lane
// configurations that the SQL stores (engine/store/sqlite and
// engine/store/postgres) share: JSON documents with times as unix
// nanoseconds (0 for the zero time, read back in UTC). Action params and
// results are not part of the JSON: the stores keep them verbatim in columns
// of their own, so that a store returns exactly the bytes it was given.
//
// Specs and statuses are written on every commit, so they are appended
// without reflection; they read back with encoding/json. The documents are
// what encoding/json makes of the doc types below (the tests hold the two
// to the same result), so rows written by either encoder read the same.
//
// Each store keeps its own schema and migration files (the stored form of
// its tables differs); Migrations is the loader they share.
package sqlcodec

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/jsonstr"
)

// UnixNano is t in unix nanoseconds, 0 for the zero time.
func UnixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromUnixNano is the UTC time of n unix nanoseconds, the zero time for 0.
func FromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
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
	SessionReplay  bool              `json:"sessionReplay,omitempty"`
	SubmittedAt    int64             `json:"submittedAtNs,omitempty"`
}

// AppendSpec appends the JSON of s without its action's params. It fails
// only on a retry multiplier that JSON cannot hold (NaN or infinite).
func AppendSpec(b []byte, s *engine.TaskSpec) ([]byte, error) {
	b = append(b, `{"agentId":`...)
	b = jsonstr.Append(b, s.AgentID, false)
	b = append(b, ',')
	b = appendStringField(b, "lane", s.Lane)
	b = appendStringField(b, "sessionKey", s.SessionKey)
	b = append(b, `"priority":`...)
	b = strconv.AppendInt(b, int64(s.Priority), 10)
	b = append(b, ',')
	if a := s.Action; a != nil {
		b = append(b, `"action":{"kind":`...)
		b = jsonstr.Append(b, a.Kind, false)
		b = append(b, ',')
		b = appendStringField(b, "ref", a.Ref)
		b = appendStringField(b, "selector", a.Selector)
		b[len(b)-1] = '}'
		b = append(b, ',')
	}
	b = appendStringField(b, "instruction", s.Instruction)
	b = appendStringField(b, "tabId", s.TabID)
	b = appendStringField(b, "instanceId", s.InstanceID)
	if len(s.DependsOn) > 0 {
		b = append(b, `"dependsOn":[`...)
		for i, d := range s.DependsOn {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, d, false)
		}
		b = append(b, "],"...)
	}
	b = appendStringField(b, "batchId", s.BatchID)
	b = appendStringField(b, "parentId", s.ParentID)
	b = appendIntField(b, "deadlineNs", UnixNano(s.Deadline))
	b = appendIntField(b, "timeoutNs", int64(s.Timeout))
	if r := s.Retry; r != nil {
		b = append(b, `"retry":{"maxAttempts":`...)
		b = strconv.AppendInt(b, int64(r.MaxAttempts), 10)
		b = append(b, ',')
		b = appendIntField(b, "backoffNs", int64(r.Backoff))
		if m := r.Multiplier; m != 0 {
			if math.IsNaN(m) || math.IsInf(m, 0) {
				return b, fmt.Errorf("retry multiplier %v is not a number JSON can hold", m)
			}
			b = append(b, `"multiplier":`...)
			b = strconv.AppendFloat(b, m, 'g', -1, 64)
			b = append(b, ',')
		}
		b = appendIntField(b, "maxBackoffNs", int64(r.MaxBackoff))
		if r.Jitter {
			b = append(b, `"jitter":true,`...)
		}
		b[len(b)-1] = '}'
		b = append(b, ',')
	}
	b = appendStringField(b, "webhookUrl", s.WebhookURL)
	b = appendStringField(b, "idempotencyKey", s.IdempotencyKey)
	if len(s.Labels) > 0 {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `"labels":{`...)
		for _, k := range keys {
			b = jsonstr.Append(b, k, false)
			b = append(b, ':')
			b = jsonstr.Append(b, s.Labels[k], false)
			b = append(b, ',')
		}
		b[len(b)-1] = '}'
		b = append(b, ',')
	}
	b = appendIntField(b, "queueMode", int64(s.QueueMode))
	b = appendStringField(b, "exhausted", string(s.Exhausted))
	b = appendIntField(b, "sessionMaxInFlight", int64(s.SessionMaxInFlight))
	if s.SessionReplay {
		b = append(b, `"sessionReplay":true,`...)
	}
	b = appendIntField(b, "submittedAtNs", UnixNano(s.SubmittedAt))
	b[len(b)-1] = '}'
	return b, nil
}

// DecodeSpec reads a spec written by AppendSpec, with its action's params.
func DecodeSpec(doc, params []byte) (*engine.TaskSpec, error) {
	var d specDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	s := &engine.TaskSpec{
		AgentID: d.AgentID, Lane: d.Lane, SessionKey: d.SessionKey, Priority: d.Priority,
		Instruction: d.Instruction, TabID: d.TabID, InstanceID: d.InstanceID, DependsOn: d.DependsOn,
		BatchID: d.BatchID, ParentID: d.ParentID, Deadline: FromUnixNano(d.Deadline), Timeout: time.Duration(d.Timeout),
		WebhookURL: d.WebhookURL, IdempotencyKey: d.IdempotencyKey, Labels: d.Labels, QueueMode: d.QueueMode,
		Exhausted: d.Exhausted, SessionMaxInFlight: d.SessionMax, SessionReplay: d.SessionReplay, SubmittedAt: FromUnixNano(d.SubmittedAt),
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
	Code       string            `json:"code,omitempty"`
	TabTime    int64             `json:"tabTimeNs,omitempty"`
	ActionTime int64             `json:"actionTimeNs,omitempty"`
	Fault      bool              `json:"instanceFault,omitempty"`
	// EndedBy is who ended the attempt (engine.Ender's name), absent while
	// it runs and in statuses written before it was kept: a field of the
	// JSON document, which builds without it ignore, so it needs no
	// migration.
	EndedBy string `json:"endedBy,omitempty"`
}

// statusDoc is what changes over a task's life, apart from its state and
// its result (columns of their own).
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

// AppendStatus appends the JSON of t's status.
func AppendStatus(b []byte, t *engine.Task) []byte {
	b = append(b, '{')
	b = appendIntField(b, "depth", int64(t.Depth))
	b = appendIntField(b, "rank", t.Rank)
	b = appendStringField(b, "reason", t.Reason)
	if len(t.Attempts) > 0 {
		b = append(b, `"attempts":[`...)
		for i := range t.Attempts {
			a := &t.Attempts[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"n":`...)
			b = strconv.AppendInt(b, int64(a.N), 10)
			b = append(b, ',')
			if a.LeaseID != 0 {
				b = append(b, `"leaseId":`...)
				b = strconv.AppendUint(b, a.LeaseID, 10)
				b = append(b, ',')
			}
			b = appendStringField(b, "instanceId", a.InstanceID)
			b = appendStringField(b, "tabId", a.TabID)
			b = appendIntField(b, "assignedAtNs", UnixNano(a.AssignedAt))
			b = appendIntField(b, "startedAtNs", UnixNano(a.StartedAt))
			b = appendIntField(b, "endedAtNs", UnixNano(a.EndedAt))
			b = appendIntField(b, "class", int64(a.Class))
			b = appendIntField(b, "httpStatus", int64(a.HTTPStatus))
			b = appendStringField(b, "error", a.Error)
			b = appendStringField(b, "code", a.Code)
			b = appendIntField(b, "tabTimeNs", int64(a.TabTime))
			b = appendIntField(b, "actionTimeNs", int64(a.ActionTime))
			if a.InstanceFault {
				b = append(b, `"instanceFault":true,`...)
			}
			b = appendStringField(b, "endedBy", a.EndedBy.String())
			b[len(b)-1] = '}'
		}
		b = append(b, "],"...)
	}
	b = appendStringField(b, "error", t.Error)
	b = appendIntField(b, "class", int64(t.Class))
	b = appendStringField(b, "retryOf", t.RetryOf)
	b = appendIntField(b, "createdAtNs", UnixNano(t.CreatedAt))
	b = appendIntField(b, "updatedAtNs", UnixNano(t.UpdatedAt))
	b = appendIntField(b, "queuedAtNs", UnixNano(t.QueuedAt))
	b = appendIntField(b, "nextRunAtNs", UnixNano(t.NextRunAt))
	b = appendIntField(b, "endedAtNs", UnixNano(t.EndedAt))
	if t.LastSeq != 0 {
		b = append(b, `"lastSeq":`...)
		b = strconv.AppendUint(b, t.LastSeq, 10)
		b = append(b, ',')
	}
	b = appendIntField(b, "unmet", int64(t.Unmet))
	b = appendIntField(b, "resetAt", int64(t.ResetAt))
	if len(t.Webhooks) > 0 { // rare: the reflective encoder is fine
		raw, _ := json.Marshal(t.Webhooks)
		b = append(b, `"webhooks":`...)
		b = append(b, raw...)
		b = append(b, ',')
	}
	if b[len(b)-1] == ',' {
		b[len(b)-1] = '}'
		return b
	}
	return append(b, '}')
}

// DecodeStatus reads a status written by AppendStatus into t.
func DecodeStatus(data []byte, t *engine.Task) error {
	var d statusDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("decode status: %w", err)
	}
	t.Depth, t.Rank, t.Reason, t.Error, t.Class, t.RetryOf = d.Depth, d.Rank, d.Reason, d.Error, d.Class, d.RetryOf
	t.CreatedAt, t.UpdatedAt, t.QueuedAt = FromUnixNano(d.CreatedAt), FromUnixNano(d.UpdatedAt), FromUnixNano(d.QueuedAt)
	t.NextRunAt, t.EndedAt = FromUnixNano(d.NextRunAt), FromUnixNano(d.EndedAt)
	t.LastSeq, t.Unmet, t.ResetAt, t.Position = d.LastSeq, d.Unmet, d.ResetAt, -1 // a position is computed, not stored
	t.Webhooks = d.Webhooks
	if len(d.Attempts) > 0 {
		t.Attempts = make([]engine.Attempt, len(d.Attempts))
		for i, a := range d.Attempts {
			t.Attempts[i] = engine.Attempt{N: a.N, LeaseID: a.LeaseID, InstanceID: a.InstanceID, TabID: a.TabID,
				AssignedAt: FromUnixNano(a.AssignedAt), StartedAt: FromUnixNano(a.StartedAt), EndedAt: FromUnixNano(a.EndedAt),
				Class: a.Class, HTTPStatus: a.HTTPStatus, Error: a.Error, Code: a.Code,
				TabTime: time.Duration(a.TabTime), ActionTime: time.Duration(a.ActionTime), InstanceFault: a.Fault,
				EndedBy: engine.ParseEnder(a.EndedBy)}
		}
	}
	return nil
}

// EncodeLane returns the JSON of a lane's configuration.
func EncodeLane(l *engine.LaneConfig) ([]byte, error) { return json.Marshal(l) }

// DecodeLane reads a lane's configuration written by EncodeLane.
func DecodeLane(data []byte) (engine.LaneConfig, error) {
	var l engine.LaneConfig
	if err := json.Unmarshal(data, &l); err != nil {
		return l, fmt.Errorf("decode lane: %w", err)
	}
	return l, nil
}

// appendIntField appends "name":v, when v is not zero.
func appendIntField(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, ',')
}

// appendStringField appends "name":"v", when v is not empty.
func appendStringField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	b = jsonstr.Append(b, v, false)
	return append(b, ',')
}
