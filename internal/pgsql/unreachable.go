package pgsql

import (
	"context"
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unreachable says whether err, from Open, is a failure to reach the
// database server (refused, timed out, no route, a name that does not
// resolve, a server starting up or shutting down), not a refusal of who
// the daemon is or of what it asked. A daemon waits at start for the
// first (a reboot of the database host, a fail-over, a start before the
// database's), serving /healthz; the second ends its start.
func Unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 57P03: the database system is starting up / shutting down.
		return pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.As(err, &oe) || errors.Is(err, context.DeadlineExceeded)
}
