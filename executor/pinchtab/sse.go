// A Server-Sent Events decoder, after the WHATWG HTML standard's "event stream
// interpretation", because chat-style instances answer with event streams and
// a network hands them over in arbitrary pieces: lines end in LF, CRLF or a
// lone CR (even when the CR and the LF arrive in separate reads), comments
// start with a colon, an event's data may span several lines, and a stream that
// ends in the middle of an event must not yield half an answer.

package pinchtab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the decoder, so that a broken or hostile stream cannot exhaust
// memory.
const (
	DefaultMaxSSELine  = 1 << 20  // bytes in one line
	DefaultMaxSSEEvent = 16 << 20 // bytes of data in one event
)

// Errors of a malformed event stream.
var (
	// ErrSSETruncated means the stream ended in the middle of an event: data
	// had arrived but not the blank line that completes the event.
	ErrSSETruncated = errors.New("event stream ended in the middle of an event")
	// ErrSSELineTooLong means a line exceeded the decoder's limit.
	ErrSSELineTooLong = errors.New("event stream line too long")
	// ErrSSEEventTooLarge means an event's data exceeded the decoder's limit.
	ErrSSEEventTooLarge = errors.New("event stream event too large")
)

// Event is one dispatched server-sent event.
type Event struct {
	Type  string // the "event" field; "message" when the event set none
	Data  string // the "data" lines joined with "\n"
	ID    string // the last event id seen so far in the stream
	Retry int    // the "retry" field in milliseconds, or -1
}

// SSEDecoder reads events from a stream.
type SSEDecoder struct {
	r        *bufio.Reader
	MaxLine  int // bytes in one line; DefaultMaxSSELine when 0
	MaxEvent int // bytes of data in one event; DefaultMaxSSEEvent when 0

	line    []byte
	skipLF  bool // the previous line ended in CR: a following LF belongs to it
	data    strings.Builder
	hasData bool
	typ     string
	lastID  string
	retry   int
}

// NewSSEDecoder returns a decoder reading from r.
func NewSSEDecoder(r io.Reader) *SSEDecoder {
	return &SSEDecoder{r: bufio.NewReaderSize(r, 16<<10), retry: -1}
}

// Next returns the next event. At the end of the stream it returns io.EOF, or
// ErrSSETruncated when an event was incomplete; a failed read returns the
// reader's error.
func (d *SSEDecoder) Next() (Event, error) {
	for {
		line, err := d.readLine()
		if err != nil {
			if err == io.EOF && (d.hasData || (len(line) > 0 && line[0] != ':')) {
				return Event{}, ErrSSETruncated
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if ev, ok := d.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := d.field(line); err != nil {
			return Event{}, err
		}
	}
}

// readLine returns the next line without its terminator. At the end of the
// stream it returns the unterminated rest, if any, with io.EOF.
func (d *SSEDecoder) readLine() ([]byte, error) {
	max := d.MaxLine
	if max <= 0 {
		max = DefaultMaxSSELine
	}
	d.line = d.line[:0]
	for {
		b, err := d.r.ReadByte()
		if err != nil {
			return d.line, err
		}
		if d.skipLF {
			d.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return d.line, nil
		case '\r':
			d.skipLF = true
			return d.line, nil
		}
		if len(d.line) >= max {
			return nil, fmt.Errorf("%w (over %d bytes)", ErrSSELineTooLong, max)
		}
		d.line = append(d.line, b)
	}
}

// field interprets one non-empty line.
func (d *SSEDecoder) field(line []byte) error {
	if line[0] == ':' {
		return nil // a comment, such as a keep-alive
	}
	name, value := string(line), ""
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name, value = name[:i], name[i+1:]
		value = strings.TrimPrefix(value, " ")
	}
	switch name {
	case "event":
		d.typ = value
	case "data":
		max := d.MaxEvent
		if max <= 0 {
			max = DefaultMaxSSEEvent
		}
		if d.data.Len()+len(value)+1 > max {
			return fmt.Errorf("%w (over %d bytes)", ErrSSEEventTooLarge, max)
		}
		if d.hasData {
			d.data.WriteByte('\n')
		}
		d.data.WriteString(value)
		d.hasData = true
	case "id":
		if !strings.ContainsRune(value, 0) {
			d.lastID = value
		}
	case "retry":
		if n, err := strconv.Atoi(value); err == nil && n >= 0 && strings.Trim(value, "0123456789") == "" {
			d.retry = n
		}
	}
	// Unknown fields are ignored, as the standard says.
	return nil
}

// dispatch completes the pending event at a blank line. An event without data
// is not dispatched.
func (d *SSEDecoder) dispatch() (Event, bool) {
	defer func() {
		d.data.Reset()
		d.hasData = false
		d.typ = ""
	}()
	if !d.hasData {
		return Event{}, false
	}
	ev := Event{Type: d.typ, Data: d.data.String(), ID: d.lastID, Retry: d.retry}
	if ev.Type == "" {
		ev.Type = "message"
	}
	if !utf8.ValidString(ev.Data) {
		ev.Data = strings.ToValidUTF8(ev.Data, "\uFFFD")
	}
	return ev, true
}
