package pinchtab_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// decodeAll reads every event of stream, delivered through wrap.
func decodeAll(stream string, wrap func(io.Reader) io.Reader) ([]pinchtab.Event, error) {
	dec := pinchtab.NewSSEDecoder(wrap(strings.NewReader(stream)))
	var out []pinchtab.Event
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// splitReader returns the stream in the pieces given, in order, to check that
// a terminator split across reads is understood.
type splitReader struct{ parts []string }

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	s.parts[0] = s.parts[0][n:]
	if s.parts[0] == "" {
		s.parts = s.parts[1:]
	}
	return n, nil
}

func TestSSEDecoderFollowsTheStandard(t *testing.T) {
	t.Parallel()
	ev := func(typ, data string) pinchtab.Event { return pinchtab.Event{Type: typ, Data: data, Retry: -1} }
	cases := []struct {
		name   string
		stream string
		want   []pinchtab.Event
	}{
		{"one event", "data: hello\n\n", []pinchtab.Event{ev("message", "hello")}},
		{"CRLF line ends", "data: a\r\n\r\ndata: b\r\n\r\n", []pinchtab.Event{ev("message", "a"), ev("message", "b")}},
		{"lone CR line ends", "data: a\r\rdata: b\r\r", []pinchtab.Event{ev("message", "a"), ev("message", "b")}},
		{"multi-line data joins with LF", "data: line1\ndata: line2\ndata:\n\n", []pinchtab.Event{ev("message", "line1\nline2\n")}},
		{"comments are skipped", ": keep-alive\n:\ndata: x\n: between\n\n", []pinchtab.Event{ev("message", "x")}},
		{"event type", "event: progress\ndata: 50%\n\nevent: result\ndata: {\"ok\":true}\n\n", []pinchtab.Event{ev("progress", "50%"), ev("result", `{"ok":true}`)}},
		{"only one leading space is stripped", "data:  two spaces\ndata:none\n\n", []pinchtab.Event{ev("message", " two spaces\nnone")}},
		{"a field without colon has an empty value", "data\n\n", []pinchtab.Event{ev("message", "")}},
		{"events without data are not dispatched", "event: ping\n\ndata: x\n\n", []pinchtab.Event{ev("message", "x")}},
		{"unknown fields are ignored", "foo: bar\ndata: x\n\n", []pinchtab.Event{ev("message", "x")}},
		{"blank lines between events", "\n\n\ndata: x\n\n\n", []pinchtab.Event{ev("message", "x")}},
		{"id and retry", "id: 7\nretry: 1500\ndata: x\n\nretry: soon\ndata: y\n\n", []pinchtab.Event{
			{Type: "message", Data: "x", ID: "7", Retry: 1500}, {Type: "message", Data: "y", ID: "7", Retry: 1500},
		}},
		{"invalid UTF-8 is replaced", "data: a\xffb\n\n", []pinchtab.Event{ev("message", "a\uFFFDb")}},
		{"a trailing comment at EOF is fine", "data: x\n\n: bye", []pinchtab.Event{ev("message", "x")}},
	}
	wrappers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for _, tc := range cases {
		for wname, wrap := range wrappers {
			got, err := decodeAll(tc.stream, wrap)
			require.NoError(t, err, "%s (%s)", tc.name, wname)
			require.Equal(t, tc.want, got, "%s (%s)", tc.name, wname)
		}
	}
}

func TestSSEDecoderJoinsCRLFSplitAcrossReads(t *testing.T) {
	t.Parallel()
	dec := pinchtab.NewSSEDecoder(&splitReader{parts: []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"}})
	ev, err := dec.Next()
	require.NoError(t, err)
	require.Equal(t, "a\nb", ev.Data, "a CR and an LF in separate reads are one line end")
	_, err = dec.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestSSEDecoderRejectsMalformedStreams(t *testing.T) {
	t.Parallel()
	// Ends inside an event: data arrived, the blank line did not.
	got, err := decodeAll("data: first\n\ndata: cut sho", func(r io.Reader) io.Reader { return r })
	require.ErrorIs(t, err, pinchtab.ErrSSETruncated)
	require.Len(t, got, 1, "the complete event before the cut is delivered")

	_, err = decodeAll("data: complete line but no blank line\n", func(r io.Reader) io.Reader { return r })
	require.ErrorIs(t, err, pinchtab.ErrSSETruncated)

	dec := pinchtab.NewSSEDecoder(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	dec.MaxLine = 50
	_, err = dec.Next()
	require.ErrorIs(t, err, pinchtab.ErrSSELineTooLong)

	dec = pinchtab.NewSSEDecoder(strings.NewReader(strings.Repeat("data: 0123456789\n", 10) + "\n"))
	dec.MaxEvent = 64
	_, err = dec.Next()
	require.ErrorIs(t, err, pinchtab.ErrSSEEventTooLarge)

	// A read error is reported as it is.
	boom := errors.New("connection reset")
	dec = pinchtab.NewSSEDecoder(io.MultiReader(strings.NewReader("data: x\n"), iotest.ErrReader(boom)))
	_, err = dec.Next()
	require.ErrorIs(t, err, boom)
}

func sseReply(stream string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}
}

func TestChatReturnsTheLastDataEvent(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, sseReply(": hello\n\nevent: progress\ndata: thinking\n\ndata: {\"answer\":42}\n\ndata: [DONE]\n\n"))
	res, err := newClient(t, rec).Chat(agentCtx(), pinchtab.ChatRequest{Instruction: "find the answer", TabID: "T3", Params: json.RawMessage(`{"model":"m"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"answer":42}`, string(res.Result))
	require.Equal(t, 2, res.Events)
	got := rec.last(t)
	require.Equal(t, "POST", got.Method)
	require.Equal(t, "/chat", got.Path)
	require.JSONEq(t, `{"instruction":"find the answer","tabId":"T3","model":"m"}`, got.Body)
	require.Equal(t, "Bearer "+testToken, got.Auth)
	require.Equal(t, "agent-7", got.Agent)
}

func TestChatTextAnswerBecomesAJSONString(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, sseReply("data: The title is\ndata: Example\n\n"))
	res, err := newClient(t, rec).Chat(context.Background(), pinchtab.ChatRequest{Instruction: "read"})
	require.NoError(t, err)
	require.JSONEq(t, `"The title is\nExample"`, string(res.Result))
}

func TestChatFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		stream    string
		retryable bool
		contains  string
	}{
		{"error event", "data: working\n\nevent: error\ndata: page refused\n\n", false, "page refused"},
		{"no data event", ": nothing\n\n", true, "without a data event"},
		{"truncated", "data: partial answ", true, "middle of an event"},
	}
	for _, tc := range cases {
		rec := newRecorder(t, sseReply(tc.stream))
		_, err := newClient(t, rec).Chat(context.Background(), pinchtab.ChatRequest{Instruction: "x"})
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe, tc.name)
		require.Equal(t, tc.retryable, pe.Retryable(), tc.name)
		require.Contains(t, err.Error(), tc.contains, tc.name)
	}
}

func TestChatAcceptsAPlainJSONAnswer(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, jsonReply(200, `{"answer":"yes"}`))
	res, err := newClient(t, rec).Chat(context.Background(), pinchtab.ChatRequest{Instruction: "x"})
	require.NoError(t, err)
	require.JSONEq(t, `{"answer":"yes"}`, string(res.Result))
}

func TestCancellingAChatAbortsTheStream(t *testing.T) {
	t.Parallel()
	firstSent := make(chan struct{})
	serverSawCancel := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: step 1\n\n")
		w.(http.Flusher).Flush()
		close(firstSent)
		select {
		case <-r.Context().Done():
			close(serverSawCancel)
		case <-time.After(10 * time.Second):
			_, _ = io.WriteString(w, "data: too late\n\n")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-firstSent
		cancel()
	}()
	start := time.Now()
	_, err := newClient(t, rec).Chat(ctx, pinchtab.ChatRequest{Instruction: "long work"})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), 5*time.Second, "the stream was not aborted")
	select {
	case <-serverSawCancel:
	case <-time.After(5 * time.Second):
		t.Fatal("the instance never saw the stream aborted")
	}
}
