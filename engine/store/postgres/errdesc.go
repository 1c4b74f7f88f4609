package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard/switchyard/internal/storeerr"
)

func init() { storeerr.RegisterDriver("github.com/jackc/pgx/", describeError) }

// describeError describes pgx's errors for clients (storeerr): a
// PostgreSQL error by its SQLSTATE, a failed connection by its cause.
func describeError(err error) (string, bool) {
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	switch {
	case errors.As(err, &pgErr):
		return describeSQLState(pgErr.Code), true
	case pgconn.Timeout(err):
		return "the database cannot be reached (timeout)", true
	case errors.Is(err, pgconn.ErrConnClosed):
		return "the database cannot be reached (connection lost)", true
	case errors.As(err, &connErr):
		if desc, ok := storeerr.Common(err); ok {
			return desc, true
		}
		return "the database cannot be reached (connection failed)", true
	}
	return "", false
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
