package pg

import (
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unreachable reports whether err says the database could not be reached or went away (no
// connection, a dropped one, the server shutting down or starting) rather than that it refused
// a statement. Callers answer it as a condition to retry, not as a bug of ours.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exception; 57P01-57P03: shut down by an administrator, by a
		// crash, or not accepting connections yet.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// A statement on a connection pgx had already closed (its socket went away).
	return errors.Is(err, pgconn.ErrConnClosed)
}
