package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// CheckTenancy fails t with every way a migrated schema breaks the rule a database distributed
// by client needs (tenancy.Check), one line each (docs/operations.md#past-one-postgresql).
func CheckTenancy(t testing.TB, db tenancy.DB, s tenancy.Schema) {
	t.Helper()
	problems, err := tenancy.Check(context.Background(), db, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the %s schema breaks the tenancy rule (docs/operations.md#past-one-postgresql):\n%s", s.Name, strings.Join(problems, "\n"))
	}
}
