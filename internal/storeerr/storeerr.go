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
package storeerr

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"reflect"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/ncruces/go-sqlite3"
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

// driverPackages are the packages whose errors are store errors.
var driverPackages = []string{"github.com/jackc/pgx/", "github.com/ncruces/go-sqlite3"}

// isStore reports whether err itself (not what it wraps) is a store error.
func isStore(err error) bool {
	if _, ok := err.(*marked); ok {
		return true
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, p := range driverPackages {
		if strings.HasPrefix(t.PkgPath(), p) {
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
	var pgErr *pgconn.PgError
	var sqErr *sqlite3.Error
	var sqCode sqlite3.ErrorCode
	var dnsErr *net.DNSError
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &pgErr):
		return describeSQLState(pgErr.Code)
	case errors.As(err, &sqErr):
		return describeSQLite(sqErr.Code())
	case errors.As(err, &sqCode):
		return describeSQLite(sqCode)
	case errors.Is(err, syscall.ENOSPC):
		return "the database refused the write (disk full)"
	case errors.Is(err, syscall.EROFS):
		return "the database refused the write (read-only)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the database cannot be reached (connection refused)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return "the database cannot be reached (connection reset)"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "the database cannot be reached (network unreachable)"
	case errors.As(err, &dnsErr):
		return "the database cannot be reached (host name not resolved)"
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "the database cannot be reached (timeout)"
	case errors.Is(err, context.Canceled):
		return "the database operation was cancelled"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.Is(err, pgconn.ErrConnClosed):
		return "the database cannot be reached (connection lost)"
	case errors.Is(err, fs.ErrPermission):
		return "the database refused the write (permission denied)"
	case errors.As(err, &connErr):
		return "the database cannot be reached (connection failed)"
	}
	return "the database failed (see the server log)"
}

// describeSQLState describes a PostgreSQL error by its SQLSTATE: the
// common ones in words, the others by their class.
func describeSQLState(code string) string {
	switch code {
	case "53100":
		return "the database refused the write (disk full)"
	case "25006":
		return "the database refused the write (read-only)"
	case "53300":
		return "the database refused the connection (too many connections)"
	case "57P01", "57P02":
		return "the database cannot be reached (shutting down)"
	case "57P03":
		return "the database cannot be reached (starting up)"
	case "57014":
		return "the database cancelled the statement (timeout)"
	case "3D000":
		return "the database cannot be reached (no such database)"
	case "40001":
		return "the database refused the transaction (serialization failure, SQLSTATE 40001)"
	case "40P01":
		return "the database refused the transaction (deadlock, SQLSTATE 40P01)"
	}
	class := "other"
	if len(code) == 5 {
		if c, ok := sqlStateClasses[code[:2]]; ok {
			class = c
		}
	}
	if strings.HasPrefix(code, "28") {
		return "the database refused the connection (" + class + ", SQLSTATE " + code + ")"
	}
	if strings.HasPrefix(code, "08") {
		return "the database cannot be reached (" + class + ", SQLSTATE " + code + ")"
	}
	return "the database reported an error (" + class + ", SQLSTATE " + code + ")"
}

// sqlStateClasses names PostgreSQL's SQLSTATE classes (Appendix A of its
// manual).
var sqlStateClasses = map[string]string{
	"08": "connection exception",
	"0A": "feature not supported",
	"21": "cardinality violation",
	"22": "data exception",
	"23": "integrity constraint violation",
	"25": "invalid transaction state",
	"28": "invalid authorization specification",
	"2D": "invalid transaction termination",
	"3D": "invalid catalog name",
	"3F": "invalid schema name",
	"40": "transaction rollback",
	"42": "syntax error or access rule violation",
	"53": "insufficient resources",
	"54": "program limit exceeded",
	"55": "object not in prerequisite state",
	"57": "operator intervention",
	"58": "system error",
	"F0": "configuration file error",
	"P0": "PL/pgSQL error",
	"XX": "internal error",
}

// describeSQLite describes a SQLite error by its primary result code.
func describeSQLite(code sqlite3.ErrorCode) string {
	switch code {
	case sqlite3.FULL:
		return "the database refused the write (disk full)"
	case sqlite3.READONLY:
		return "the database refused the write (read-only)"
	case sqlite3.PERM, sqlite3.AUTH:
		return "the database refused the write (permission denied)"
	case sqlite3.BUSY, sqlite3.LOCKED:
		return "the database is locked by another process"
	case sqlite3.CANTOPEN:
		return "the database file cannot be opened"
	case sqlite3.IOERR:
		return "the database file cannot be read or written (I/O error)"
	case sqlite3.CORRUPT, sqlite3.NOTADB:
		return "the database file is corrupt"
	case sqlite3.INTERRUPT:
		return "the database operation was interrupted"
	}
	return "the database reported an error (SQLite result code " + strconv.Itoa(int(code)) + ")"
}
