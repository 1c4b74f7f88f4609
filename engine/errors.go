package engine

import (
	"errors"
	"fmt"
)

// Code classifies an engine error. The codes are part of the public contract:
// the GraphQL layer reports them verbatim as extensions.code.
type Code string

// Error codes.
const (
	CodeInvalidInput  Code = "INVALID_INPUT"  // the request is malformed; Field names the culprit
	CodeNotFound      Code = "NOT_FOUND"      // no such task, lane, batch, …
	CodeConflict      Code = "CONFLICT"       // the request does not fit the current state
	CodeQueueFull     Code = "QUEUE_FULL"     // admission refused: a queue cap is reached
	CodeDraining      Code = "DRAINING"       // the engine is shutting down and refuses new work
	CodeCycle         Code = "CYCLE"          // dependencies would form a cycle
	CodeLimit         Code = "LIMIT"          // a request limit (batch size, …) is exceeded
	CodeUnavailable   Code = "UNAVAILABLE"    // the store cannot confirm durability right now
	CodePluginInvalid Code = "PLUGIN_INVALID" // a policy plugin was refused at load
)

// Error is the engine's typed error. Use errors.As to inspect it, or IsCode.
type Error struct {
	Code    Code
	Message string
	// Field is the input path at fault, for CodeInvalidInput (e.g. "lane",
	// "items.3.dependsOn").
	Field string
	// IDs are the tasks involved (the cycle, the unknown dependencies).
	IDs []string
	// Retryable says whether the same request may succeed later.
	Retryable bool
	// Counts carries the numbers behind a CodeQueueFull: the scope that is
	// full ("global", "lane", "agent", "session"), its count and its cap.
	Counts *QueueCounts
	// TaskID is the id of the task recorded for the refusal (a REJECTED task),
	// when there is one; for a CONFLICT on an idempotency key, the task the
	// key already names.
	TaskID string
	Err    error // the cause, if any
}

// QueueCounts describes a full queue.
type QueueCounts struct {
	Scope  string
	Key    string // the lane, agent or session name
	Queued int
	Cap    int
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any engine error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// IsCode reports whether err is, or wraps, an engine error with the code c.
func IsCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is returned by stores for a missing record; engine methods wrap
// it in an Error with CodeNotFound.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by an engine that has been shut down.
var ErrClosed = errors.New("engine closed")
