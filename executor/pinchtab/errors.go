// Errors from an instance: what failed, the HTTP status and the instance's own
// code and message, and whether retrying may help.

package pinchtab

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxErrorBody bounds how much of an error response the client reads.
const maxErrorBody = 64 << 10

// Error is a failed request to an instance. Status is 0 when no response
// arrived (a network failure, a timeout, a cancellation).
type Error struct {
	// Instance is what the instance is, as Client.Name says ("chromium",
	// "pinchtab"); "" is "pinchtab". Attribute sets it.
	Instance string
	Op       string // what the client was doing: "action", "navigate", …
	Method   string
	Path     string
	Status   int    // the HTTP status, or 0
	Code     string // the instance's error code ("tab_not_found"), if it gave one
	Message  string // the instance's error message, if it gave one
	Err      error  // the underlying failure, for Status 0

	// RetryableFlag is the instance's own "retryable": true. PinchTab sets it
	// only when a retry can help; a body with a code and without the flag
	// says that retrying will not.
	RetryableFlag bool

	// Malformed is set when the instance answered 2xx with something the
	// client cannot use (an undecodable body, a truncated event stream).
	Malformed bool

	// Sent is set on a failure without a status when the request had been
	// written whole to its connection before the connection broke or the
	// wait for the answer failed (net/http's httptrace WroteRequest said
	// so): the instance may have received it and acted on it. A request
	// that was never written whole — a refused connection, a DNS or TLS
	// failure, a connection that broke while it was being written — leaves
	// it false. MayHaveRun reads it.
	Sent bool

	// Fault is set on an error the caller found, from what else it knows of
	// the instance, to be an instance fault although its status and code
	// alone do not say so (a PinchTab server's 404 for a tab of a browser it
	// has stopped): InstanceFault reports true, and the message says
	// "(instance fault)" rather than the code's own verdict. AsInstanceFault
	// sets it on a copy.
	Fault bool

	// Verdict, when set, is what the message says comes next in place of
	// the code's own verdict ("(not retryable)"): the caller knows better
	// (a task whose tab's page stopped responding runs again in a new tab).
	Verdict string
}

// AsInstanceFault returns a copy of e that is an instance fault
// (InstanceFault, hence Retryable), whatever its status and code say.
func (e *Error) AsInstanceFault() *Error {
	c := *e
	c.Fault = true
	return &c
}

// Attribute names the instance an error came from (Client.Name: the
// built-in Chromium's errors say "chromium click (POST …)", not
// "pinchtab click"), on the *Error or *WaitTimeoutError in err that names
// none yet. It returns err.
func Attribute(err error, name string) error {
	var pe *Error
	if errors.As(err, &pe) && pe.Instance == "" {
		pe.Instance = name
	}
	var we *WaitTimeoutError
	if errors.As(err, &we) && we.Instance == "" {
		we.Instance = name
	}
	return err
}

// malformed returns the *Error for a 2xx answer the client cannot use.
func malformed(op, method, path string, status int, msg string, err error) *Error {
	return &Error{Op: op, Method: method, Path: path, Status: status, Message: msg, Err: err, Malformed: true}
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(cmp.Or(e.Instance, "pinchtab"))
	b.WriteByte(' ')
	b.WriteString(e.Op)
	b.WriteString(" (")
	b.WriteString(e.Method)
	b.WriteByte(' ')
	b.WriteString(e.Path)
	b.WriteString("): ")
	if e.Status == 0 {
		if e.Err != nil {
			b.WriteString(e.Err.Error())
		} else {
			b.WriteString("no response")
		}
		return b.String()
	}
	if e.Malformed {
		b.WriteString("unusable answer")
		if e.Message != "" {
			b.WriteString(": ")
			b.WriteString(e.Message)
		}
		if e.Err != nil {
			b.WriteString(": ")
			b.WriteString(e.Err.Error())
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%d %s", e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		b.WriteString(" [")
		b.WriteString(e.Code)
		b.WriteByte(']')
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Code != "" || e.Fault {
		if e.Verdict != "" {
			b.WriteString(" (" + e.Verdict + ")")
		} else if e.InstanceFault() {
			b.WriteString(" (instance fault)")
		} else if e.RetryableFlag {
			b.WriteString(" (retryable)")
		} else {
			b.WriteString(" (not retryable)")
		}
	}
	return b.String()
}

// Unwrap returns the underlying failure.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the instance's error code (engine.ErrorCoder): a retry
// policy sees it as the failed attempt's code.
func (e *Error) ErrorCode() string { return e.Code }

// Network reports whether the request got no HTTP response at all (a refused
// or broken connection, a timeout, a cancellation).
func (e *Error) Network() bool { return e.Status == 0 }

// Retryable reports whether retrying the request may help. The instance's own
// word comes first: an error body with a code (PinchTab's {"error","code",
// "retryable"}) is retryable exactly when it says "retryable": true, whatever
// the status — PinchTab answers 500 for a selector that matches nothing, and
// 409 navigation_changed for a click that navigated, neither worth repeating.
// Instance faults (InstanceFault) are retryable: the fault is the instance's,
// and another attempt may find it back. Without a code the status decides:
// network failures and timeouts, 408, 409, 423, 429, every 5xx and unusable
// answers may; 400, 404 and the other 4xx may not.
func (e *Error) Retryable() bool {
	if e.Malformed {
		return true
	}
	if e.Status == 0 {
		return !errors.Is(e.Err, context.Canceled)
	}
	if e.InstanceFault() {
		return true
	}
	if e.Code != "" {
		return e.RetryableFlag
	}
	return RetryableStatus(e.Status)
}

// CodePageUnresponsive is the code of an error that says a tab's page
// stopped responding (its script never yields) and that the instance closed
// the tab for it: the built-in Chromium answers it (504, not retryable) when
// a request's work on a tab ran out of time and the page then did not answer
// a trivial script either. The tab is gone; the page it held is lost.
const CodePageUnresponsive = "page_unresponsive"

// instanceFaultCodes are PinchTab's codes for an instance that cannot serve
// any request right now: its browser is draining, restarting or not there, or
// it refused the token.
var instanceFaultCodes = map[string]bool{
	"bad_token": true, "missing_token": true, "token_required": true,
	"bridge_unavailable": true, "browser_draining": true, "browser_target_unavailable": true,
}

// InstanceFault reports whether the failure is the instance's rather than the
// request's: it could not be reached (a refused or broken connection, not a
// timeout or cancellation of the request), it refused the credentials (401),
// it is unavailable, starting or shutting down (503), a PinchTab server could
// not reach the browser behind it (502 without a more specific code), or it
// answered with one of PinchTab's codes for those states, or the caller
// marked it so (Fault, AsInstanceFault). Any other request to it would fail
// alike, so an attempt that ends this way says nothing about
// the task.
func (e *Error) InstanceFault() bool {
	switch {
	case e.Fault:
		return true
	case e.Malformed:
		return false
	case e.Status == 0:
		return e.Err != nil && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) && !isTimeout(e.Err)
	case instanceFaultCodes[e.Code]:
		return true
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusServiceUnavailable:
		return true
	case e.Status == http.StatusBadGateway:
		return e.Code == "" || e.Code == "error"
	}
	return false
}

// MayHaveRun reports whether the instance may have carried out the request
// although it failed: what an at-most-once task must know of an instance
// fault (InstanceFault). It is false only when the failure rules that out,
// as PinchTab's handlers show:
//   - no answer came, and the request was never written whole (Sent is
//     false: a refused connection — an instance that is restarting or gone
//     —, a DNS or TLS failure, a connection that broke while the request
//     was being written), or the connection was one the instance had
//     already closed as idle ("server closed idle connection");
//   - the instance turned the request away before any handler ran: 401
//     (PinchTab's authentication runs before its routes), PinchTab's own
//     503 — its error body with a code (it answers so while its browser
//     drains or restarts, when it has no bridge, or, on a server, when the
//     tab's browser is not running, each before acting) —, or one of
//     PinchTab's codes for those states (missing_token, bad_token,
//     token_required, browser_draining, bridge_unavailable,
//     browser_target_unavailable);
//   - a PinchTab server answered 502 because it could not connect to the
//     browser behind it (its message names the refused dial: "instance
//     unreachable: … dial tcp …: connect: connection refused");
//   - a server's 404 for a tab of a browser it has stopped, which the
//     caller marked as an instance fault (Fault): the server routed the
//     request nowhere.
//
// Everything else may have run: a connection that broke, or an answer
// that did not come in time, after the request was written (the instance
// died mid-action, or a PinchTab bridge closed the connection of an action
// that outlived its server's write timeout), a 502 whose origin cannot be
// ruled out (a server's browser that died while it acted: "instance
// unreachable: … EOF"), a 503 without PinchTab's error body (a proxy in
// front of it whose connection to it broke once it had passed the request
// on: "upstream connect error or disconnect/reset before headers"), an
// unusable 2xx answer, and every answer of a handler that ran.
func (e *Error) MayHaveRun() bool {
	switch {
	case e.Malformed:
		return true
	case e.Status == 0:
		return e.Sent && !closedIdle(e.Err)
	case instanceFaultCodes[e.Code]:
		return false
	case e.Status == http.StatusUnauthorized:
		return false
	case e.Status == http.StatusServiceUnavailable:
		return e.Code == "" // not PinchTab's: its origin cannot be ruled out
	case e.Status == http.StatusBadGateway:
		return !refusedDial(e.Message)
	case e.Status == http.StatusNotFound:
		return !e.Fault
	}
	return true
}

// closedIdle reports whether err is net/http's word for a keep-alive
// connection the server closed before the request could use it: the
// server never read the request.
func closedIdle(err error) bool {
	return err != nil && strings.Contains(err.Error(), "server closed idle connection")
}

// refusedDial reports whether the message of a server's 502 says that it
// could not open a connection to the browser behind it: Go's error for a
// dial, which PinchTab's proxy puts in its message ("instance unreachable:
// Post "…": dial tcp 127.0.0.1:9868: connect: connection refused"). The
// request never left the server.
func refusedDial(msg string) bool {
	return strings.Contains(msg, "dial tcp ") || strings.Contains(msg, "dial unix ")
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// RetryableStatus reports whether a request that failed with status may
// succeed when retried.
func RetryableStatus(status int) bool {
	switch {
	case status >= 500:
		return true
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusLocked, status == http.StatusTooManyRequests:
		return true
	}
	return false
}

// StatusOf returns the HTTP status of err when it is an *Error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// responseError builds the *Error for a non-2xx response, reading the
// instance's {"error","code"} body when there is one.
func responseError(op, method, path string, resp *http.Response) *Error {
	e := &Error{Op: op, Method: method, Path: path, Status: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var shaped struct {
		Error     json.RawMessage `json:"error"`
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		Detail    string          `json:"detail"` // application/problem+json
		Reason    string          `json:"reason"` // a bridge's /health {"status":"error","reason"}
		Retryable bool            `json:"retryable"`
	}
	if json.Unmarshal(body, &shaped) == nil {
		e.Code = shaped.Code
		e.RetryableFlag = shaped.Retryable
		e.Message = cmp.Or(shaped.Message, shaped.Detail, shaped.Reason)
		if len(shaped.Error) > 0 {
			var s string
			if json.Unmarshal(shaped.Error, &s) == nil {
				e.Message = s
			} else {
				// Some servers nest {"error":{"code","message"}}.
				var nested struct{ Code, Message string }
				if json.Unmarshal(shaped.Error, &nested) == nil {
					if e.Code == "" {
						e.Code = nested.Code
					}
					e.Message = nested.Message
				}
			}
		}
		return e
	}
	e.Message = excerpt(body, 200)
	return e
}

// excerpt returns the start of a text body, one line, at most n bytes.
func excerpt(body []byte, n int) string {
	s := strings.TrimSpace(string(body))
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}
