package pinchtab

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSSEDecoder checks the decoder against a reference reading of the
// standard's event stream interpretation, written for clarity rather than
// speed: on any input, split into reads of any size, with any limits, the
// decoder yields the reference's events and then its ending (io.EOF,
// ErrSSETruncated or a limit error) — and never panics or grows past its
// limits.
func FuzzSSEDecoder(f *testing.F) {
	for _, seed := range []string{
		"data: hello\n\n", "data: a\ndata: b\n\nevent: done\ndata: {\"ok\":true}\n\n", ": keep-alive\r\n\r\ndata:x\r\n\r\n",
		"data: lone\rdata: cr\r\r", "id: 7\nretry: 1500\ndata: z\n\n", "data: truncated", "event: x\n", "data\n\n", "data:\n\n",
		"retry: 12a\nid: a\x00b\ndata: \xff\xfe\n\n", "::\n\n:", "data: " + strings.Repeat("y", 300) + "\n\n",
	} {
		f.Add([]byte(seed), uint8(1), uint16(64), uint16(256))
		f.Add([]byte(seed), uint8(7), uint16(0), uint16(0))
	}
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8, maxLine, maxEvent uint16) {
		d := NewSSEDecoder(&chunked{data: stream, n: int(chunk%16) + 1})
		d.MaxLine, d.MaxEvent = int(maxLine), int(maxEvent)
		want, wantErr := referenceSSE(stream, d.MaxLine, d.MaxEvent)
		for i := 0; ; i++ {
			ev, err := d.Next()
			if err != nil {
				if i != len(want) {
					t.Fatalf("ended (%v) after %d events; want %d: %+v", err, i, len(want), want)
				}
				if !errors.Is(err, wantErr) {
					t.Fatalf("ended with %v, want %v", err, wantErr)
				}
				return
			}
			if i >= len(want) {
				t.Fatalf("event %d %+v: the reference has only %d", i, ev, len(want))
			}
			if ev != want[i] {
				t.Fatalf("event %d: got %+v, want %+v", i, ev, want[i])
			}
			if !utf8.ValidString(ev.Data) || ev.Type == "" {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
	})
}

// chunked reads its data n bytes at a time.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

// referenceSSE interprets a whole stream: split it into lines (LF, CRLF or
// a lone CR end one), process each, dispatch at blank lines.
func referenceSSE(stream []byte, maxLine, maxEvent int) ([]Event, error) {
	if maxLine <= 0 {
		maxLine = DefaultMaxSSELine
	}
	if maxEvent <= 0 {
		maxEvent = DefaultMaxSSEEvent
	}
	var (
		events  []Event
		data    []string
		dataLen int
		hasData bool
		typ, id string
		retry   = -1
		line    []byte
		afterCR bool
	)
	process := func(l string) error {
		if l == "" {
			if hasData {
				ev := Event{Type: typ, Data: strings.Join(data, "\n"), ID: id, Retry: retry}
				if ev.Type == "" {
					ev.Type = "message"
				}
				ev.Data = strings.ToValidUTF8(ev.Data, "\uFFFD")
				events = append(events, ev)
			}
			data, dataLen, hasData, typ = nil, 0, false, ""
			return nil
		}
		if l[0] == ':' {
			return nil
		}
		name, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "event":
			typ = value
		case "data":
			sep := 0
			if hasData {
				sep = 1
			}
			if dataLen+len(value)+1 > maxEvent {
				return ErrSSEEventTooLarge
			}
			dataLen += sep + len(value)
			data = append(data, value)
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 && strings.Trim(value, "0123456789") == "" {
				retry = n
			}
		}
		return nil
	}
	for _, b := range stream {
		if afterCR {
			afterCR = false
			if b == '\n' {
				continue
			}
		}
		if b == '\n' || b == '\r' {
			afterCR = b == '\r'
			if err := process(string(line)); err != nil {
				return events, err
			}
			line = line[:0]
			continue
		}
		if len(line) >= maxLine {
			return events, ErrSSELineTooLong
		}
		line = append(line, b)
	}
	if hasData || (len(line) > 0 && line[0] != ':') {
		return events, ErrSSETruncated
	}
	return events, io.EOF
}

// TestTheReferenceReadsTheStandardsExamples keeps the fuzz test's oracle
// honest on the standard's own examples.
func TestTheReferenceReadsTheStandardsExamples(t *testing.T) {
	t.Parallel()
	evs, err := referenceSSE([]byte("data: YHOO\ndata: +2\ndata: 10\n\n: test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"), 0, 0)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	want := []Event{
		{Type: "message", Data: "YHOO\n+2\n10", Retry: -1},
		{Type: "message", Data: "first event", ID: "1", Retry: -1},
		{Type: "message", Data: "second event", Retry: -1},
		{Type: "message", Data: " third event", Retry: -1},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %+v", evs)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Fatalf("event %d: got %+v, want %+v", i, evs[i], want[i])
		}
	}
	if _, err := referenceSSE(bytes.Repeat([]byte("x"), 10), 5, 0); !errors.Is(err, ErrSSELineTooLong) {
		t.Fatalf("a long line: %v", err)
	}
}
