// Events as JSON, encoded once: a subscriber of the feed sends the same
// bytes as every other subscriber for the same event, so the cost of a
// thousand subscribers is a thousand copies, not a thousand encodings.

package eventstream

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/jsonstr"
)

// AppendEvent appends the JSON object of an event to b: the fields of the
// GraphQL TaskEvent type (seq, kind, at, taskId, agentId, lane, sessionKey,
// batchId, from, to, attempt, reason), null ones left out.
func AppendEvent(b []byte, e *engine.Event) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"kind":"`...)
	b = append(b, e.Type.String()...)
	b = append(b, `","at":"`...)
	b = e.At.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendField(b, "taskId", e.TaskID)
	b = appendField(b, "agentId", e.AgentID)
	b = appendField(b, "lane", e.Lane)
	b = appendField(b, "sessionKey", e.SessionKey)
	b = appendField(b, "batchId", e.BatchID)
	if e.From != 0 {
		b = append(b, `,"from":"`...)
		b = append(b, e.From.String()...)
		b = append(b, '"')
	}
	if e.To != 0 {
		b = append(b, `,"to":"`...)
		b = append(b, e.To.String()...)
		b = append(b, '"')
	}
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(e.Attempt), 10)
	}
	b = appendField(b, "reason", e.Reason)
	return append(b, '}')
}

// AppendLagged appends the JSON object of a LAGGED notice.
func AppendLagged(b []byte, it *Item) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, it.Event.Seq, 10)
	b = append(b, `,"kind":"LAGGED","at":"`...)
	b = it.Event.At.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","skipped":`...)
	b = strconv.AppendUint(b, it.Lagged, 10)
	b = appendField(b, "reason", it.Reason)
	return append(b, '}')
}

func appendField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return jsonstr.Append(b, v, true)
}

// Encoded keeps the JSON of recent events, by seq, for every subscriber to
// share. It is safe for concurrent use and never blocks: two subscribers
// that miss the same event both encode it, and one of the copies stays.
type Encoded struct {
	slots []atomic.Pointer[encodedEvent]
	mask  uint64
}

type encodedEvent struct {
	seq uint64
	b   []byte
}

// NewEncoded returns a cache of about size events (rounded up to a power
// of two).
func NewEncoded(size int) *Encoded {
	n := 1
	for n < size {
		n <<= 1
	}
	return &Encoded{slots: make([]atomic.Pointer[encodedEvent], n), mask: uint64(n - 1)}
}

// Get returns the JSON of e, encoding it unless a subscriber already has.
// The returned bytes must not be modified.
func (c *Encoded) Get(e *engine.Event) []byte {
	slot := &c.slots[e.Seq&c.mask]
	if p := slot.Load(); p != nil && p.seq == e.Seq {
		return p.b
	}
	b := AppendEvent(make([]byte, 0, 192), e)
	slot.Store(&encodedEvent{seq: e.Seq, b: b})
	return b
}
