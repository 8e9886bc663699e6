// Package redistest gives tests a real Redis server and a key prefix of their own.
//
// deploy/local/redis-ensure.sh decides which server: $MNV_TEST_REDIS_URL or $MNV_REDIS_URL when
// set, else the local server, else a private throwaway one it starts; so `go test` works in
// any module of the workspace on a fresh machine, as pgtest does for PostgreSQL. Under -short it
// reaches no server and starts none: URL skips its test.
package redistest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mnvhq/mnv/services/platform/findup"
)

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ErrShort is ServerURL's error under -short.
var ErrShort = errors.New("redistest: no Redis under -short")

// short is pgtest.Short, kept here so redistest does not pull pgx into the tests that use it.
func short() bool {
	return testing.Testing() && flag.Parsed() && testing.Short()
}

// ServerURL returns the URL of the server the tests use.
func ServerURL() (string, error) {
	if short() {
		return "", ErrShort
	}
	serverOnce.Do(func() {
		serverURL, serverErr = findup.Output(filepath.Join("deploy", "local", "redis-ensure.sh"))
		if errors.Is(serverErr, findup.ErrNotFound) {
			serverErr = errors.New("deploy/local/redis-ensure.sh was not found above the working directory")
		}
	})
	return serverURL, serverErr
}

// URL returns the server's URL, or fails t.
func URL(t testing.TB) string {
	t.Helper()
	if short() {
		t.Skip("redistest: needs Redis; skipped under -short")
	}
	u, err := ServerURL()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return u
}

// Prefix returns a key prefix no other test uses, so tests share the server (and run in
// parallel) without seeing each other's keys.
func Prefix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "mnvtest:" + hex.EncodeToString(b) + ":"
}
