package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// A request that reached the server but got no answer — --request-timeout
// ran out while the server worked on it, or the connection broke once it
// was sent — may have been applied: a submission that timed out so may
// have been admitted. That is not "the server could not be reached"
// (ExitUnreachable, for a refused connection, a name that does not
// resolve, a dial that fails or times out: nothing was sent), but an
// outcome of its own, NoAnswerError, exit code ExitRetry: send it again,
// with the same idempotency key for a submission, which is applied once.

// NoAnswerError is the failure of a request sent whole to the server that
// got no (whole) answer.
type NoAnswerError struct {
	// Timeout is --request-timeout when it ran out; zero when the
	// connection broke (Err says how).
	Timeout time.Duration
	Err     error
}

func (e *NoAnswerError) Error() string {
	what := fmt.Sprintf("the connection broke after the request was sent (%v)", e.Err)
	if e.Timeout > 0 {
		what = fmt.Sprintf("no answer within --request-timeout %s after the request was sent", e.Timeout)
	}
	return what + ": it may have been applied; send it again with the same idempotency key (a submission with one is applied once), or check before sending it again"
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// answerTimeout is the transport of the verbs' HTTP client: it bounds each
// request, its answer's body included, by timeout (as http.Client.Timeout
// would), and tells a request that was sent whole and got no answer
// (NoAnswerError) from one that never left.
type answerTimeout struct {
	base    http.RoundTripper
	timeout time.Duration
}

func (t *answerTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Upgrade") != "" {
		// A WebSocket's handshake: the time bounds it, not the stream that
		// follows (whose body is the connection, left as it is).
		ctx, cancel := context.WithCancel(req.Context())
		timer := time.AfterFunc(t.timeout, cancel)
		res, err := t.base.RoundTrip(req.WithContext(ctx))
		if !timer.Stop() || err != nil {
			cancel()
		}
		return res, err
	}
	parent := req.Context()
	ctx, cancel := context.WithTimeout(parent, t.timeout)
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			sent.Store(true)
		}
	}})
	noAnswer := func(err error) error {
		switch {
		case err == nil, !sent.Load(), parent.Err() != nil: // not sent, or the verb itself gave up (interrupted)
			return err
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return &NoAnswerError{Timeout: t.timeout, Err: err}
		default:
			return &NoAnswerError{Err: err}
		}
	}
	res, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		defer cancel()
		if ctx.Err() != nil && !sent.Load() && parent.Err() == nil {
			// Still connecting when the time ran out: nothing was sent.
			return nil, fmt.Errorf("no connection within --request-timeout %s: %w", t.timeout, err)
		}
		return nil, noAnswer(err)
	}
	res.Body = &answerBody{ReadCloser: res.Body, cancel: cancel, wrap: noAnswer}
	return res, nil
}

// answerBody is an answer's body: the request's time runs until it is
// closed, and an error reading it is the request's (NoAnswerError).
type answerBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	wrap   func(error) error
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = b.wrap(err)
	}
	return n, err
}

func (b *answerBody) Close() error {
	defer b.cancel()
	return b.ReadCloser.Close()
}
