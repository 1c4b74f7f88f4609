// Subscriptions over Server-Sent Events: a POST with Accept:
// text/event-stream, answered with "next" events and a final "complete".

package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// SSEStream is a subscription over Server-Sent Events.
type SSEStream struct {
	body     io.ReadCloser
	sc       *bufio.Scanner
	cancel   context.CancelFunc
	complete bool // the "complete" event was read: the server ends the response
}

// Reading to the end of a completed stream, so that its connection can be
// reused: the server ends the response right after the "complete" event, so
// there is at most the chunked encoding's last chunk to read; Close gives
// up (and closes the connection) after this much time or data.
const (
	drainTimeout = 100 * time.Millisecond
	drainMax     = 4 << 10
)

// SubscribeSSE starts a subscription over Server-Sent Events. Close the
// stream when done.
func (c *Client) SubscribeSSE(ctx context.Context, query string, vars map[string]any) (*SSEStream, error) {
	if err := checkUTF8(query, vars); err != nil {
		return nil, err
	}
	body, err := json.Marshal(Request{Query: query, Variables: vars})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	c.headers(hr)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	res, err := c.httpClient().Do(hr)
	if err != nil {
		cancel()
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		return nil, &StatusError{Status: res.StatusCode, Body: string(data)}
	}
	sc := bufio.NewScanner(res.Body)
	// The buffer starts small and doubles up to 64 MiB for a long line: most
	// streams carry small messages, and a 64 KiB buffer for each of them
	// (one stream per followed task) made the garbage collector run that
	// much more often.
	sc.Buffer(nil, 64<<20)
	return &SSEStream{body: res.Body, sc: sc, cancel: cancel}, nil
}

// Next returns the next message, or io.EOF after the "complete" event.
func (s *SSEStream) Next() (Message, error) {
	event := ""
	var data strings.Builder
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if event == "complete" {
				s.complete = true
				return Message{}, io.EOF
			}
			if data.Len() == 0 {
				event = ""
				continue // a comment-only block (keepalive)
			}
			var m Message
			if err := json.Unmarshal([]byte(data.String()), &m); err != nil {
				return Message{}, fmt.Errorf("undecodable event: %w", err)
			}
			return m, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := s.sc.Err(); err != nil {
		return Message{}, err
	}
	return Message{}, io.EOF
}

// Close ends the stream. A stream read to its "complete" event is read to
// the end of its response first, so that the connection goes back to the
// client's pool for the next request: an HTTP/1.1 response cut short (the
// request cancelled, the body closed early) takes its connection with it,
// and the next request pays for a new one. Any other stream is cut short:
// that is how a client stops a subscription over SSE.
func (s *SSEStream) Close() error {
	if s.complete {
		stop := time.AfterFunc(drainTimeout, s.cancel)
		_, _ = io.Copy(io.Discard, io.LimitReader(s.body, drainMax))
		stop.Stop()
	}
	err := s.body.Close()
	s.cancel()
	return err
}
