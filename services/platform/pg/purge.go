package pg

import (
	"context"
	"fmt"
	"time"
)

// Purge runs one retention statement of a store (platform/purge runs the rules), whose $1 is
// the age in seconds and $2 the most rows to remove, and returns how many it removed; what
// names the rows in its error.
func Purge(ctx context.Context, db DB, what, sql string, age time.Duration, limit int) (int64, error) {
	tag, err := db.Exec(ctx, sql, age.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", what, err)
	}
	return tag.RowsAffected(), nil
}
