package pg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pg"
)

func scanName(r pgx.Row) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}

// TestPage reads pages of one owner's rows: their order, their total, the pages past the end
// and an owner without rows.
func TestPage(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE rows (owner text NOT NULL, name text NOT NULL, PRIMARY KEY (owner, name));
		INSERT INTO rows SELECT 'a', 'r' || lpad(g::text, 2, '0') FROM generate_series(1, 5) g;
		INSERT INTO rows VALUES ('b', 'other')`); err != nil {
		t.Fatal(err)
	}
	args := []any{"a"}
	q := pg.PageQuery{Columns: "name", From: "FROM rows WHERE owner = $1", Order: "name DESC", Args: args}
	tests := []struct {
		name          string
		q             pg.PageQuery
		limit, offset int64
		want          []string
		total         int64
	}{
		{"first page", q, 2, 0, []string{"r05", "r04"}, 5},
		{"middle page", q, 2, 2, []string{"r03", "r02"}, 5},
		{"last, short page", q, 2, 4, []string{"r01"}, 5},
		{"past the end", q, 2, 6, nil, 5},
		{"all of it", q, 100, 0, []string{"r05", "r04", "r03", "r02", "r01"}, 5},
		{"no rows", pg.PageQuery{Columns: "name", From: "FROM rows WHERE owner = $1", Order: "name", Args: []any{"c"}}, 2, 0, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, total, err := pg.Page(ctx, pool, tt.q, tt.limit, tt.offset, scanName)
			if err != nil {
				t.Fatalf("Page: %v", err)
			}
			if !slices.Equal(got, tt.want) || total != tt.total {
				t.Errorf("Page = %v, total %d; want %v, total %d", got, total, tt.want, tt.total)
			}
		})
	}
	if len(args) != 1 || cap(args) != 1 {
		t.Errorf("the query's args were changed: %v", args)
	}
	if _, _, err := pg.Page(ctx, pool, pg.PageQuery{Columns: "nope", From: "FROM rows", Order: "name"}, 1, 0, scanName); err == nil {
		t.Error("a statement PostgreSQL refuses read as a page")
	}
	// ORDER BY name would sort by name::text, the select list's, which no index holds.
	shadowed := pg.PageQuery{Columns: "name::text", From: "FROM rows WHERE owner = $1", Order: "name", Args: args}
	if _, _, err := pg.Page(ctx, pool, shadowed, 1, 0, scanName); err == nil {
		t.Error("an ORDER BY of a computed column read as a page")
	}
	shadowed.Order = "rows.name"
	if got, _, err := pg.Page(ctx, pool, shadowed, 1, 0, scanName); err != nil || !slices.Equal(got, []string{"r01"}) {
		t.Errorf("ORDER BY the qualified column = %v, %v; want [r01]", got, err)
	}
}

// TestPageAgreesWithItsTotal reads the whole list again and again while rows are added to it:
// every read's rows must be as many as its total says. A count of its own, before or after
// the page, fails this within a few reads.
func TestPageAgreesWithItsTotal(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE grows (id bigserial PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	written := make(chan error, 1)
	go func() {
		var err error
		for wctx.Err() == nil && err == nil {
			_, err = pool.Exec(wctx, `INSERT INTO grows DEFAULT VALUES`)
		}
		if wctx.Err() != nil {
			err = nil
		}
		written <- err
	}()
	defer func() {
		stop()
		if err := <-written; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()
	q := pg.PageQuery{Columns: "id", From: "FROM grows", Order: "id"}
	scanID := func(r pgx.Row) (int64, error) {
		var id int64
		err := r.Scan(&id)
		return id, err
	}
	for deadline, reads := time.Now().Add(time.Second), 0; time.Now().Before(deadline) || reads < 50; reads++ {
		ids, total, err := pg.Page(ctx, pool, q, 1_000_000, 0, scanID)
		if err != nil {
			t.Fatalf("Page: %v", err)
		}
		if int64(len(ids)) != total {
			t.Fatalf("read %d: %d rows under a total of %d", reads, len(ids), total)
		}
	}
}
