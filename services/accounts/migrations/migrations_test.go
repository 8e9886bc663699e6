package migrations_test

import (
	"os"
	"testing"

	"github.com/mnvhq/mnv/services/accounts/migrations"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestUpgradeMatchesFresh: a database created by any shipped version of the migrations
// (testdata/history/<commit>) and migrated to these has the schema of a fresh one.
func TestUpgradeMatchesFresh(t *testing.T) {
	pgtest.CheckUpgrades(t, "accounts", migrations.FS, os.DirFS("testdata/history"), idempotency.Migrations())
}
