package sqlite

// How engine records become column values and back. Specs and statuses are
// JSON (readable with the sqlite3 shell and json_extract); times in them are
// unix nanoseconds (0 for the zero time) and read back in UTC. Action params
// and results are not part of the JSON: they are stored verbatim in their own
// columns, so that a store returns exactly the bytes it was given. Events are
// packed in chunks with a compact binary encoding (see encodeEvents).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

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

type actionJSON struct {
	Kind     string `json:"kind"`
	Ref      string `json:"ref,omitempty"`
	Selector string `json:"selector,omitempty"`
}

type retryJSON struct {
	MaxAttempts int     `json:"maxAttempts"`
	Backoff     int64   `json:"backoffNs,omitempty"`
	Multiplier  float64 `json:"multiplier,omitempty"`
	MaxBackoff  int64   `json:"maxBackoffNs,omitempty"`
	Jitter      bool    `json:"jitter,omitempty"`
}

type specJSON struct {
	AgentID        string            `json:"agentId"`
	Lane           string            `json:"lane,omitempty"`
	SessionKey     string            `json:"sessionKey,omitempty"`
	Priority       engine.Priority   `json:"priority"`
	Action         *actionJSON       `json:"action,omitempty"`
	Instruction    string            `json:"instruction,omitempty"`
	TabID          string            `json:"tabId,omitempty"`
	InstanceID     string            `json:"instanceId,omitempty"`
	DependsOn      []string          `json:"dependsOn,omitempty"`
	BatchID        string            `json:"batchId,omitempty"`
	ParentID       string            `json:"parentId,omitempty"`
	Deadline       int64             `json:"deadlineNs,omitempty"`
	Timeout        int64             `json:"timeoutNs,omitempty"`
	Retry          *retryJSON        `json:"retry,omitempty"`
	WebhookURL     string            `json:"webhookUrl,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	QueueMode      engine.QueueMode  `json:"queueMode,omitempty"`
	Exhausted      engine.Exhausted  `json:"exhausted,omitempty"`
	SessionMax     int               `json:"sessionMaxInFlight,omitempty"`
	SubmittedAt    int64             `json:"submittedAtNs,omitempty"`
}

func encodeSpec(s *engine.TaskSpec) ([]byte, error) {
	j := specJSON{
		AgentID: s.AgentID, Lane: s.Lane, SessionKey: s.SessionKey, Priority: s.Priority,
		Instruction: s.Instruction, TabID: s.TabID, InstanceID: s.InstanceID, DependsOn: s.DependsOn,
		BatchID: s.BatchID, ParentID: s.ParentID, Deadline: unixNano(s.Deadline), Timeout: int64(s.Timeout),
		WebhookURL: s.WebhookURL, IdempotencyKey: s.IdempotencyKey, Labels: s.Labels, QueueMode: s.QueueMode, Exhausted: s.Exhausted, SessionMax: s.SessionMaxInFlight,
		SubmittedAt: unixNano(s.SubmittedAt),
	}
	if a := s.Action; a != nil {
		j.Action = &actionJSON{Kind: a.Kind, Ref: a.Ref, Selector: a.Selector}
	}
	if r := s.Retry; r != nil {
		j.Retry = &retryJSON{MaxAttempts: r.MaxAttempts, Backoff: int64(r.Backoff), Multiplier: r.Multiplier,
			MaxBackoff: int64(r.MaxBackoff), Jitter: r.Jitter}
	}
	return json.Marshal(&j)
}

func decodeSpec(data, params []byte) (*engine.TaskSpec, error) {
	var j specJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	s := &engine.TaskSpec{
		AgentID: j.AgentID, Lane: j.Lane, SessionKey: j.SessionKey, Priority: j.Priority,
		Instruction: j.Instruction, TabID: j.TabID, InstanceID: j.InstanceID, DependsOn: j.DependsOn,
		BatchID: j.BatchID, ParentID: j.ParentID, Deadline: fromUnixNano(j.Deadline), Timeout: time.Duration(j.Timeout),
		WebhookURL: j.WebhookURL, IdempotencyKey: j.IdempotencyKey, Labels: j.Labels, QueueMode: j.QueueMode, Exhausted: j.Exhausted, SessionMaxInFlight: j.SessionMax,
		SubmittedAt: fromUnixNano(j.SubmittedAt),
	}
	if a := j.Action; a != nil {
		s.Action = &engine.Action{Kind: a.Kind, Ref: a.Ref, Selector: a.Selector, Params: params}
	}
	if r := j.Retry; r != nil {
		s.Retry = &engine.RetryPolicy{MaxAttempts: r.MaxAttempts, Backoff: time.Duration(r.Backoff), Multiplier: r.Multiplier,
			MaxBackoff: time.Duration(r.MaxBackoff), Jitter: r.Jitter}
	}
	return s, nil
}

type attemptJSON struct {
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

// statusJSON is what changes over a task's life, apart from its state (a
// column) and its result (a column).
type statusJSON struct {
	Depth     int                      `json:"depth,omitempty"`
	Rank      int64                    `json:"rank,omitempty"`
	Reason    string                   `json:"reason,omitempty"`
	Attempts  []attemptJSON            `json:"attempts,omitempty"`
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

func decodeStatus(data []byte, t *engine.Task) error {
	var j statusJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("decode status: %w", err)
	}
	t.Depth, t.Rank, t.Reason, t.Error, t.Class, t.RetryOf = j.Depth, j.Rank, j.Reason, j.Error, j.Class, j.RetryOf
	t.CreatedAt, t.UpdatedAt, t.QueuedAt = fromUnixNano(j.CreatedAt), fromUnixNano(j.UpdatedAt), fromUnixNano(j.QueuedAt)
	t.NextRunAt, t.EndedAt = fromUnixNano(j.NextRunAt), fromUnixNano(j.EndedAt)
	t.LastSeq, t.Unmet, t.ResetAt, t.Position = j.LastSeq, j.Unmet, j.ResetAt, -1 // a position is computed, not stored
	t.Webhooks = j.Webhooks
	if len(j.Attempts) > 0 {
		t.Attempts = make([]engine.Attempt, len(j.Attempts))
		for i, a := range j.Attempts {
			t.Attempts[i] = engine.Attempt{N: a.N, LeaseID: a.LeaseID, InstanceID: a.InstanceID, TabID: a.TabID,
				AssignedAt: fromUnixNano(a.AssignedAt), StartedAt: fromUnixNano(a.StartedAt), EndedAt: fromUnixNano(a.EndedAt),
				Class: a.Class, HTTPStatus: a.HTTPStatus, Error: a.Error,
				TabTime: time.Duration(a.TabTime), ActionTime: time.Duration(a.ActionTime), InstanceFault: a.Fault}
		}
	}
	return nil
}

// Event chunks. A chunk is a version byte followed by its events, each as:
// uvarint seq delta (from the previous event, or from 0), zigzag varint at
// delta (unix ns, 0 for the zero time), type, from, to (one byte each),
// varint attempt, and six length-prefixed strings: task, agent, lane,
// session, batch, reason.

// Version 2 adds a flags byte after the state bytes (bit 0: the event's
// Webhook); version 1 chunks read as flags 0.
const chunkVersion = 2

var errBadChunk = errors.New("corrupt event chunk")

func encodeEvents(dst []byte, evs []engine.Event) []byte {
	dst = append(dst, chunkVersion)
	var prevSeq uint64
	var prevAt int64
	for i := range evs {
		e := &evs[i]
		at := unixNano(e.At)
		dst = binary.AppendUvarint(dst, e.Seq-prevSeq)
		dst = binary.AppendVarint(dst, at-prevAt)
		prevSeq, prevAt = e.Seq, at
		var flags byte
		if e.Webhook {
			flags |= 1
		}
		dst = append(dst, byte(e.Type), byte(e.From), byte(e.To), flags)
		dst = binary.AppendVarint(dst, int64(e.Attempt))
		for _, s := range [...]string{e.TaskID, e.AgentID, e.Lane, e.SessionKey, e.BatchID, e.Reason} {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
	}
	return dst
}

// decodeEvents appends the events of a chunk to dst, calling keep (when not
// nil) to decide which ones.
func decodeEvents(dst []engine.Event, data []byte, keep func(seq uint64) bool) ([]engine.Event, error) {
	if len(data) == 0 || data[0] < 1 || data[0] > chunkVersion {
		return dst, errBadChunk
	}
	version := data[0]
	p := data[1:]
	var seq uint64
	var at int64
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	sv := func() (int64, bool) {
		v, n := binary.Varint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(p)) {
			return "", false
		}
		s := string(p[:n])
		p = p[n:]
		return s, true
	}
	for len(p) > 0 {
		d, ok1 := uv()
		da, ok2 := sv()
		if !ok1 || !ok2 || len(p) < 3 {
			return dst, errBadChunk
		}
		seq += d
		at += da
		e := engine.Event{Seq: seq, At: fromUnixNano(at), Type: engine.EventType(p[0]), From: engine.State(p[1]), To: engine.State(p[2])}
		p = p[3:]
		if version >= 2 {
			if len(p) < 1 {
				return dst, errBadChunk
			}
			e.Webhook = p[0]&1 != 0
			p = p[1:]
		}
		att, ok := sv()
		if !ok {
			return dst, errBadChunk
		}
		e.Attempt = int(att)
		for _, f := range [...]*string{&e.TaskID, &e.AgentID, &e.Lane, &e.SessionKey, &e.BatchID, &e.Reason} {
			if *f, ok = str(); !ok {
				return dst, errBadChunk
			}
		}
		if keep == nil || keep(seq) {
			dst = append(dst, e)
		}
	}
	return dst, nil
}

// appendSeqs appends seqs to a task's event list (uvarints).
func appendSeqs(dst []byte, seqs ...uint64) []byte {
	for _, s := range seqs {
		dst = binary.AppendUvarint(dst, s)
	}
	return dst
}

func decodeSeqs(dst []uint64, data []byte) []uint64 {
	for len(data) > 0 {
		v, n := binary.Uvarint(data)
		if n <= 0 {
			return dst
		}
		dst = append(dst, v)
		data = data[n:]
	}
	return dst
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

// appendStatus appends the JSON of t's status: the same document as
// encodeStatus, written without reflection (it runs for every snapshot the
// engine commits).
func appendStatus(b []byte, t *engine.Task) []byte {
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
			b = appendIntField(b, "assignedAtNs", unixNano(a.AssignedAt))
			b = appendIntField(b, "startedAtNs", unixNano(a.StartedAt))
			b = appendIntField(b, "endedAtNs", unixNano(a.EndedAt))
			b = appendIntField(b, "class", int64(a.Class))
			b = appendIntField(b, "httpStatus", int64(a.HTTPStatus))
			b = appendStringField(b, "error", a.Error)
			b = appendIntField(b, "tabTimeNs", int64(a.TabTime))
			b = appendIntField(b, "actionTimeNs", int64(a.ActionTime))
			if a.InstanceFault {
				b = append(b, `"instanceFault":true,`...)
			}
			b[len(b)-1] = '}'
		}
		b = append(b, "],"...)
	}
	b = appendStringField(b, "error", t.Error)
	b = appendIntField(b, "class", int64(t.Class))
	b = appendStringField(b, "retryOf", t.RetryOf)
	b = appendIntField(b, "createdAtNs", unixNano(t.CreatedAt))
	b = appendIntField(b, "updatedAtNs", unixNano(t.UpdatedAt))
	b = appendIntField(b, "queuedAtNs", unixNano(t.QueuedAt))
	b = appendIntField(b, "nextRunAtNs", unixNano(t.NextRunAt))
	b = appendIntField(b, "endedAtNs", unixNano(t.EndedAt))
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
	b = appendJSONString(b, v)
	return append(b, ',')
}

// appendJSONString appends s as a JSON string, as encoding/json would
// (invalid UTF-8 becomes U+FFFD), without HTML escaping.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
