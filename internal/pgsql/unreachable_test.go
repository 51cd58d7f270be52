package pgsql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnreachable: only a database server that cannot be reached (or is
// starting up) is waited for at start; a refusal of who the daemon is or
// of what it asked ends the start.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("database: connect to x: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"timed out", fmt.Errorf("database: %w", context.DeadlineExceeded), true},
		{"starting up", fmt.Errorf("database: %w", &pgconn.PgError{Code: "57P03"}), true},
		{"bad password", fmt.Errorf("database: %w", &pgconn.PgError{Code: "28P01"}), false},
		{"no such database", fmt.Errorf("database: %w", &pgconn.PgError{Code: "3D000"}), false},
		{"newer schema", errors.New("schema version 99 is newer than this reclaimd knows"), false},
		{"password file", &os.PathError{Op: "open", Path: "/etc/strata/reclaimd-db.password", Err: os.ErrNotExist}, false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
