// Package connecttest gives connect's tests what they share: a fresh, migrated database behind
// a real pool, and fresh keys to seal and hash numbers.
package connecttest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/crypto"
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

// Numbers returns fresh keys that seal numbers (and anything else at rest) and hash them.
func Numbers(t testing.TB) profiles.Numbers {
	t.Helper()
	keyring, err := crypto.ParseKeyring(crypto.NewKeySpec("t1"))
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := phone.NewHasher([]byte(crypto.NewSecret()))
	if err != nil {
		t.Fatal(err)
	}
	return profiles.Numbers{Keyring: keyring, Hasher: hasher}
}
