// Package pgtest gives tests a real PostgreSQL database of their own.
//
// The server is $DATABASE_URL when set; otherwise deploy/local/pg-ensure.sh finds or starts one
// (the local server, or a private throwaway cluster), so `go test` works in any module of the
// workspace on a fresh machine. Each database is created empty and dropped at the end.
//
// Under `go test -short` (make test-short, the tier that needs no server) it reaches no server
// and starts none: NewDatabase skips its test, and ServerURL returns ErrShort.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/findup"
)

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ErrShort is ServerURL's error under -short.
var ErrShort = errors.New("pgtest: no PostgreSQL under -short")

// Short reports whether this is a test binary run with -short. It is false before the flags
// are parsed (a TestMain that has not called flag.Parse) and outside tests (make bench), where
// testing.Short would panic.
func Short() bool {
	return testing.Testing() && flag.Parsed() && testing.Short()
}

// ServerURL returns the URL of the server the tests use.
func ServerURL() (string, error) {
	if Short() {
		// Not even $DATABASE_URL: the short tier must pass with no server at all.
		return "", ErrShort
	}
	serverOnce.Do(func() {
		if u := os.Getenv("DATABASE_URL"); u != "" {
			serverURL = u
			return
		}
		serverURL, serverErr = findup.Output(filepath.Join("deploy", "local", "pg-ensure.sh"))
		if errors.Is(serverErr, findup.ErrNotFound) {
			serverErr = errors.New("DATABASE_URL is not set and deploy/local/pg-ensure.sh was not found above the working directory")
		}
	})
	return serverURL, serverErr
}

// CreateDatabase creates an empty database and returns its URL and a function that drops it.
func CreateDatabase(ctx context.Context) (string, func(), error) {
	server, err := ServerURL()
	if err != nil {
		return "", nil, err
	}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", nil, fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "mnvtest_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create test database: %w", err)
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", nil, fmt.Errorf("parse server url: %w", err)
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, server)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

// NewDatabase creates an empty database for t and drops it when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if Short() {
		t.Skip("pgtest: needs PostgreSQL; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, drop, err := CreateDatabase(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(drop)
	return u
}
