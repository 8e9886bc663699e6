package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// WaitNoConnections waits until the database at url has no connection whose application_name
// is LIKE pattern (pg.Open names a service's pool mnv-<service>), and fails t if one is still
// open after five seconds: a closed pool's server backends end a moment after their sockets
// close, a leaked pool's never do.
func WaitNoConnections(t testing.TB, url, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE $1`, pattern).Scan(&n); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections named like %q are still open", n, pattern)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
