// Package storeerr says what clients may be told of a store error. The
// errors of the PostgreSQL and SQLite stores carry what an operator needs —
// the database URL (without its password), the user, host, port and
// database name the driver tried, the file's path, the statement — and none
// of it is for the callers of the API: Public keeps an error's own words and
// replaces the store error inside it with a description in the product's
// terms ("the database cannot be reached (connection refused)"), which
// keeps the cause that helps a client decide what to do (refused, timed
// out, read-only, disk full, the SQLSTATE's class) and nothing that names
// the database. The full error belongs in the server's log (Withheld).
// The package depends on no driver: each store registers what its driver's
// errors mean (RegisterDriver), so that a program that links one store
// does not link the other's driver.
package storeerr

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"reflect"
	"strings"
	"syscall"

	"sync"
)

// Mark marks err as a store's error: Public describes it instead of
// showing its text. The stores mark the errors they wrap with the
// database's address or file. Mark(nil) is nil.
func Mark(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err}
}

type marked struct{ err error }

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() error { return m.err }

// A driver is a database driver whose errors are store errors.
type driver struct {
	pkg      string                     // the import path prefix of its packages
	describe func(error) (string, bool) // its own description of an error, if it has one
}

var (
	driversMu sync.RWMutex
	drivers   []driver
)

// RegisterDriver makes the errors of the Go packages whose import path
// starts with pkg store errors, and gives describe the first word on any
// store error: it returns the error's description in the product's terms,
// or false to leave it to the causes every driver shares (refused, reset,
// timed out, disk full…). Each store registers its driver when it is
// linked in (in init), so that this package depends on no driver.
func RegisterDriver(pkg string, describe func(error) (string, bool)) {
	driversMu.Lock()
	defer driversMu.Unlock()
	drivers = append(drivers, driver{pkg: pkg, describe: describe})
}

func registered() []driver {
	driversMu.RLock()
	defer driversMu.RUnlock()
	return drivers
}

// isStore reports whether err itself (not what it wraps) is a store error.
func isStore(err error) bool {
	switch err.(type) {
	case *marked, *relayed:
		return true
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, d := range registered() {
		if strings.HasPrefix(t.PkgPath(), d.pkg) {
			return true
		}
	}
	return false
}

// find returns the outermost store error in err's chain, and the error that
// wraps it directly (nil when err is the store error). A tree of errors
// (Unwrap() []error) is searched depth first.
func find(err error) (store error, found bool) {
	for e := err; e != nil; {
		if isStore(e) {
			return e, true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				if s, ok := find(x); ok {
					return s, true
				}
			}
			return nil, false
		default:
			return nil, false
		}
	}
	return nil, false
}

// IsStore reports whether err is, or wraps, a store or driver error.
func IsStore(err error) bool {
	_, ok := find(err)
	return ok
}

// Public returns err's message as clients may read it: err.Error() when
// err holds no store error; otherwise the words of the errors that wrap
// the store error, followed by Describe of it. ("" for nil.)
func Public(err error) string {
	if err == nil {
		return ""
	}
	full := err.Error()
	store, ok := find(err)
	if !ok {
		return full
	}
	desc := Describe(store)
	// The wrappers' words are the message up to the store error's text:
	// fmt.Errorf("…: %w") and engine errors put the cause last.
	if prefix, ok := strings.CutSuffix(full, store.Error()); ok && prefix != "" && strings.Count(full, store.Error()) == 1 {
		return prefix + desc
	}
	return desc
}

// Describe describes a store error in the product's words: what is wrong
// with the database, and the cause in general terms, without the address,
// user, database name, file path or statement.
func Describe(err error) string {
	if r, ok := err.(*relayed); ok {
		return r.public
	}
	for _, d := range registered() {
		if desc, ok := d.describe(err); ok {
			return desc
		}
	}
	if desc, ok := Common(err); ok {
		return desc
	}
	return "the database failed (see the server log)"
}

// Common describes the causes of a store error every driver shares (a
// refused, reset or lost connection, a timeout, a full disk…), and reports
// false for other errors.
func Common(err error) (string, bool) {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "the database refused the write (disk full)", true
	case errors.Is(err, syscall.EROFS):
		return "the database refused the write (read-only)", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the database cannot be reached (connection refused)", true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return "the database cannot be reached (connection reset)", true
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "the database cannot be reached (network unreachable)", true
	case errors.As(err, &dnsErr):
		return "the database cannot be reached (host name not resolved)", true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "the database cannot be reached (timeout)", true
	case errors.Is(err, context.Canceled):
		return "the database operation was cancelled", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return "the database cannot be reached (connection lost)", true
	case errors.Is(err, fs.ErrPermission):
		return "the database refused the write (permission denied)", true
	}
	return "", false
}

// Relayed returns the store error that another process told in general
// terms (public: its Public of the error) and logged in full (by: who, in
// words: "the leader node-1"): a node of a cluster that passes on the
// leader's answer. It is a store error (IsStore), so that it is answered
// and logged as this process's own are, with the request's id; Public and
// Describe tell public, and its Error says who logged the full error.
func Relayed(public, by string) error { return &relayed{public: public, by: by} }

type relayed struct{ public, by string }

func (r *relayed) Error() string { return r.public + " (" + r.by + " logged the full error)" }
