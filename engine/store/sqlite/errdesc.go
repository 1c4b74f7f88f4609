package sqlite

import (
	"errors"
	"strconv"

	"github.com/ncruces/go-sqlite3"

	"github.com/switchyard/switchyard/internal/storeerr"
)

func init() { storeerr.RegisterDriver("github.com/ncruces/go-sqlite3", describeError) }

// describeError describes the driver's errors for clients (storeerr) by
// their primary result code.
func describeError(err error) (string, bool) {
	var sqErr *sqlite3.Error
	var code sqlite3.ErrorCode
	switch {
	case errors.As(err, &sqErr):
		return describeSQLite(sqErr.Code()), true
	case errors.As(err, &code):
		return describeSQLite(code), true
	}
	return "", false
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
