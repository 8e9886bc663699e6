package pg_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestUnreachable provokes each failure on a real server and a real closed port, and holds the
// statement errors of a reachable database to false.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.NewDatabase(t)
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2, ApplicationName: "unreachable-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	admin, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1, ApplicationName: "unreachable-admin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)

	// A port nobody listens on: taken, then released.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := lis.Addr().(*net.TCPAddr).Port
	lis.Close()

	tests := []struct {
		name string
		err  func(t *testing.T) error
		want bool
	}{
		{"nil", func(*testing.T) error { return nil }, false},
		{"a refused statement", func(t *testing.T) error {
			_, err := pool.Exec(ctx, "SELECT 1/0")
			return err
		}, false},
		{"a unique violation", func(t *testing.T) error {
			_, err := pool.Exec(ctx, "CREATE TEMP TABLE u(x int PRIMARY KEY); INSERT INTO u VALUES (1), (1)")
			return err
		}, false},
		{"an error of our own", func(*testing.T) error { return fmt.Errorf("store: %w", errors.New("boom")) }, false},
		{"no server on the port", func(t *testing.T) error {
			c, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=2", closedPort))
			if err == nil {
				c.Close(ctx)
			}
			return fmt.Errorf("open: %w", err)
		}, true},
		{"the connection terminated by the server", func(t *testing.T) error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			var pid uint32
			if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			_, err = conn.Exec(ctx, "SELECT 1")
			return fmt.Errorf("query: %w", err)
		}, true},
		{"a statement on a closed connection", func(t *testing.T) error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if err := conn.Conn().Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, err = conn.Exec(ctx, "SELECT 1")
			return err
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			if tt.want && err == nil {
				t.Fatal("the case produced no error")
			}
			if got := pg.Unreachable(err); got != tt.want {
				t.Errorf("Unreachable(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
