// Events as JSON, encoded once: a subscriber of the feed sends the same
// bytes as every other subscriber for the same event, so the cost of a
// thousand subscribers is a thousand copies, not a thousand encodings.

package eventstream

import (
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/engine"
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
	return AppendString(b, v)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// <, > and & are escaped as encoding/json does, so that the output is safe
// in HTML too.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
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
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
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
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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
