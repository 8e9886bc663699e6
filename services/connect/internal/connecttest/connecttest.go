// Package connecttest gives connect's tests what they share: a fresh, migrated database behind
// a real pool, and fresh keys to seal and hash numbers.
package connecttest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Pool migrates a fresh database and returns a pool of maxConns connections to it, closed when
// the test ends.
func Pool(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	if err := app.Migrate(ctx, url, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Keys returns a vault of numbers under fresh keys, and its keyring, which seals everything
// else at rest (integration secrets, import chunks).
func Keys(t testing.TB) (*phone.Vault, *crypto.Keyring) {
	t.Helper()
	keyring, err := crypto.ParseKeyring(crypto.NewKeySpec("t1"))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := phone.NewHasher([]byte(crypto.NewSecret()))
	if err != nil {
		t.Fatal(err)
	}
	return phone.NewVault("connect", keyring, hasher), keyring
}

// Queue returns a River queue over pool in connect's schema, as the app builds it, and the
// outbox that writes events through it: stores that queue deliveries or emit events take them
// (store.New(db).WithJobs(q).WithOutbox(box)). Nothing works its jobs unless the test runs it.
func Queue(t testing.TB, pool *pgxpool.Pool) (*jobs.Queue, *outbox.Outbox) {
	t.Helper()
	q, err := jobs.New(pool, jobs.Options{Schema: app.Schema, Log: zaptest.NewLogger(t), FetchPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return q, outbox.New(q)
}
