package e2e_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestMigrateCommand runs each service's `migrate` command, the step a deployment runs before
// a new version serves, against an empty database and with the database URL as its only
// configuration (a migration step holds no other secret): it creates the schema, running it
// again changes nothing, and an unknown command is refused.
func TestMigrateCommand(t *testing.T) {
	url := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, svc := range []string{"accounts", "verification", "connect"} {
		t.Run(svc, func(t *testing.T) {
			run := func(arg string) ([]byte, error) {
				cmd := exec.CommandContext(context.Background(), filepath.Join(suite.BinDir, svc), arg)
				cmd.Env = []string{"DATABASE_URL=" + url}
				return cmd.CombinedOutput()
			}
			for range 2 {
				out, err := run("migrate")
				if err != nil || !strings.Contains(string(out), "schema migrated") {
					t.Fatalf("%s migrate: %v\n%s", svc, err, out)
				}
			}
			var tables int
			if err := conn.QueryRow(context.Background(),
				`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, svc).Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables == 0 {
				t.Fatalf("schema %s has no tables after migrate", svc)
			}
			out, err := run("migrat")
			if err == nil || !strings.Contains(string(out), "unknown command") {
				t.Fatalf("%s migrat: %v\n%s", svc, err, out)
			}
		})
	}
}
